"""status.py STATUS COMMAND...: runs COMMAND (standard streams closed or
discarded) and exits 0 exactly when it ends with STATUS, as
subprocess reports it: an exit status, or minus the signal that killed it."""
import subprocess
import sys

got = subprocess.run(sys.argv[2:], stdin=subprocess.DEVNULL,
                     stdout=subprocess.DEVNULL,
                     stderr=subprocess.DEVNULL).returncode
print("status: %d" % got)
sys.exit(0 if got == int(sys.argv[1]) else 1)
