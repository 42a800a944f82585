"""Registers the first N of four asyncio timers and prints their firing order."""
import asyncio, sys, time
n = int(sys.argv[1])
async def main():
    order=[]
    for d,name in [(0.3,'a'),(0.1,'b'),(0.1,'c'),(2.0,'d')][:n]:
        asyncio.get_running_loop().call_later(d, order.append, name)
    await asyncio.sleep(3)
    print(order, time.time())
asyncio.run(main())
