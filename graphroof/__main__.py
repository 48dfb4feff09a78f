import sys

from graphroof.cli import main

sys.exit(main())
