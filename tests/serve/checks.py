"""What tests/serve/*.py share: check() prints a FAILED line for each false
condition; report() prints the count and exits 1 when any failed."""
import sys

failed = 0


def check(cond, what):
    global failed
    if not cond:
        failed += 1
        print("FAILED:", what)
    return cond


def report(name):
    print(f"{name}: {failed} failed")
    sys.exit(1 if failed else 0)
