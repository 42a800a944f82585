#!/usr/bin/env python3
"""Child of examples/multiproc/parent.py: its clock and randomness."""

import datetime
import os
import random
import time
import uuid

print("python child stream %s: time %r datetime %s random %r uuid4 %s" % (
    os.environ.get("DAL_STREAM", "-"), time.time(), datetime.datetime.now().isoformat(),
    random.random(), uuid.uuid4()))
