"""Host runtimes: run an export on this machine with the real engine (optional extras)."""
