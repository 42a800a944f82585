"""A shimmed Python agent whose tools are unmodified programs: `date` and
the C probe (argv[1]) run as its children. Lines: "<kind> <name> <value>"."""
import subprocess
import sys
import time

print("fixed python_time", time.time())
sys.stdout.flush()
subprocess.run(["date", "+fixed child_date1 %s.%N"], check=True)
subprocess.run([sys.argv[1]], check=True)
subprocess.run(["date", "+fixed child_date2 %s.%N"], check=True)
