import sys

from holoxmc.cli import main

sys.exit(main())
