"""Running training steps and measuring them: the protocol, and the runtimes that execute steps."""
