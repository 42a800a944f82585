"""An agent for record/replay tests: reads clocks and randomness, sleeps,
reads input.txt, creates, modifies and deletes files, and tries to write
outside its workspace."""
import os
import random
import time
import uuid

print("start", time.time(), random.random(), uuid.uuid4())
time.sleep(0.05)
text = open("input.txt").read().strip()
print("input", text)
with open("out.txt", "w") as f:
    f.write("derived from %s: %d\n" % (text, random.randint(0, 10**6)))
with open("log.txt", "a") as f:
    f.write("appended %s\n" % os.urandom(4).hex())
os.remove("obsolete.txt")
for target in ("/etc/dal-e2e", os.path.join(os.environ["HOME"], ".dal-e2e")):
    try:
        open(target, "w")
        print("wrote", target)
    except OSError as e:
        print("refused", target, e.strerror)
print("end", time.time())
