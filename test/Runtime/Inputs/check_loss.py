"""Checks an fsdp-run log: the loss fell by at least MARGIN and ended below
ln(VOCAB) - MARGIN (a model that learned nothing stays near ln(vocab)).
"Ended" is the mean of the last (up to) 10 logged losses, so that one hard
batch at the end does not decide."""
import math
import re
import sys

log, vocab, margin = sys.argv[1], int(sys.argv[2]), float(sys.argv[3])
losses = [float(m.group(1)) for m in
          re.finditer(r"^step +\d+/\d+ \| loss ([0-9.]+)", open(log).read(),
                      re.M)]
if len(losses) < 2:
    sys.exit(f"check_loss: no progress lines in {log}")
tail = losses[-10:] if len(losses) > 10 else losses[-1:]
first, last = losses[0], sum(tail) / len(tail)
bound = math.log(vocab) - margin
print(f"check_loss: first {first:.4f} last {last:.4f} ln(vocab) "
      f"{math.log(vocab):.4f}")
if not (last < first - margin and last < bound):
    sys.exit(f"check_loss: FAILED: loss {first:.4f} -> {last:.4f} "
             f"(need a drop of {margin} and an end below {bound:.4f})")
print("check_loss: ok")
