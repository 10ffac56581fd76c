"""One module per ``af`` command. Each imports what it needs when it runs, so that
``af --help`` stays fast."""
