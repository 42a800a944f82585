"""The main thread blocks in a call dal does not wrap (a raw C lock) while
another thread, which would release it, waits for the turn: the watchdog
must notice, say so, and let the program finish."""
import _thread
import threading
import time

raw = _thread.allocate_lock()
raw.acquire()


def release_later():
    time.sleep(1)
    raw.release()


t = threading.Thread(target=release_later, name="releaser")
t.start()
raw.acquire()
t.join()
print("finished")
