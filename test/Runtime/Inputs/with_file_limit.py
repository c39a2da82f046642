#!/usr/bin/env python3
"""Runs a command with a file-size limit, as a nearly full disk would act:
writes past BYTES fail (EFBIG; SIGXFSZ is ignored so that they fail rather
than kill).

  with_file_limit.py BYTES CMD...
"""
import os
import resource
import signal
import sys

limit = int(sys.argv[1])
resource.setrlimit(resource.RLIMIT_FSIZE, (limit, limit))
signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
os.execvp(sys.argv[2], sys.argv[2:])
