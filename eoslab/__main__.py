import sys

from eoslab.cli import main

sys.exit(main())
