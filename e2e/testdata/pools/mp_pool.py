"""multiprocessing.Pool under strict mode: it used to hang (the result
handler's os.read held the turn). Prints results that depend only on the
inputs and the seed, and the main process's clock and draws after the pool."""
import multiprocessing
import random
import time


def square(x):
    return x * x


if __name__ == "__main__":
    t0 = time.monotonic()
    with multiprocessing.Pool(2) as pool:
        print("map", pool.map(square, range(4)))
        print("imap_unordered", sorted(pool.imap_unordered(square, range(6))))
        print("apply_async", pool.apply_async(square, (9,)).get(timeout=60))
        print("starmap", pool.starmap(pow, [(2, 3), (3, 2)]))
    print("elapsed", round(time.monotonic() - t0, 6))
    print("now", time.time())
    print("draw", random.random())
