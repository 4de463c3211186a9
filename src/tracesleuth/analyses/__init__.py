"""The analyses, one sub-package each, all following one contract (see :mod:`._contract`)."""
