"""Reports whether a user's sitecustomize ran next to dal's."""

import json
import time

import dal
import sitecustomize

print(json.dumps({"mark": getattr(sitecustomize, "MARK", None), "file": getattr(sitecustomize, "__file__", None),
                  "mode": dal.mode(), "time": time.time(), "saw_virtual_time": getattr(sitecustomize, "SAW", None)}))
