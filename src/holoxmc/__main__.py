"""``python -m holoxmc``: the command line, also the entry point torchrun starts per rank."""

import os
import sys

from holoxmc.cli import main

code = main()
if int(os.environ.get("WORLD_SIZE", "1")) > 1:
    # A torchrun rank leaves without C++ static destructors: after its process group is
    # destroyed, gloo's teardown at interpreter exit sometimes aborts a rank whose work is
    # done ("terminate called without an active exception", SIGABRT), and torchrun then
    # fails the whole run. Output is flushed first; nothing else is left to clean up.
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(code)
sys.exit(code)
