"""``python -m tracesleuth``."""

import sys

try:
    from .cli import main
except KeyboardInterrupt:  # Ctrl-C while Python imports the command line, before main's own guard
    sys.stderr.write("interrupted by SIGINT while starting: nothing done\n")
    sys.exit(130)

sys.exit(main())
