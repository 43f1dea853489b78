import runpy, sys
from blockfuse.ops import launch
launch.PDL = sys.argv[1] == "1"
sys.argv = ["blockfuse"] + sys.argv[2:]
runpy.run_module("blockfuse", run_name="__main__")
