"""Writes 1,000 small files into ./out (the record-overhead benchmark)."""
import os

os.makedirs("out", exist_ok=True)
for i in range(1000):
    with open(os.path.join("out", "f%04d.txt" % i), "w") as f:
        f.write("file %d\n" % i)
