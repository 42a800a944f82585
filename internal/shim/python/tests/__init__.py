"""Tests of dal's Python shim. Not shipped: dal-exec leaves tests/ out of the
installed shim tree, so this package never shadows an agent's own `tests`."""
