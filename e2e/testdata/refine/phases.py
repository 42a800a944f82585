"""An agent that checkpoints at phase boundaries (artifacts and state) and
can be told to crash after a phase: PHASES=n (default 3), CRASH_AFTER=k."""
import os
import sys
import dal

phases = int(os.environ.get("PHASES", "3"))
crash_after = int(os.environ.get("CRASH_AFTER", "0"))
os.makedirs("build", exist_ok=True)
for i in range(1, phases + 1):
    with open(f"build/phase-{i}.txt", "w") as f:
        f.write(f"output of phase {i}\n")
    tag = "release" if i == 1 else ""
    mark = dal.checkpoint(f"phase-{i}", artifacts=["build/"], state={"phase": i, "done": list(range(1, i + 1))}, tag=tag)
    print("checkpoint", mark["seq"] if mark else None, flush=True)
    if i == crash_after:
        sys.exit(3)
