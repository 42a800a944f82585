"""A refinement loop in Python: three drafts of out/report.md scored by
quality dimensions, marked with dal.iteration. Iteration 2 is the best."""
import os
import dal

DIMS = [
    {"validation": 1.0, "completeness": 0.6, "correctness": 0.7, "readability": 0.5, "efficiency": 0.5},
    {"validation": 1.0, "completeness": 0.9, "correctness": 0.9, "readability": 0.8, "efficiency": 0.7},
    {"validation": 1.0, "completeness": 0.9, "correctness": 0.8, "readability": 0.6, "efficiency": 0.6},
]
os.makedirs("out", exist_ok=True)
for i, dims in enumerate(DIMS, 1):
    with open("out/report.md", "w") as f:
        f.write(f"draft {i}\n")
    mark = dal.iteration(dimensions=dims, artifacts=["out/report.md"], note=f"draft {i}")
    print("iteration", mark["seq"] if mark else None)
