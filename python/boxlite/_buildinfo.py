# Written by setup.py at install time: the libboxlite.so of the build tree the
# package was installed from (None when installed some other way).
LIBRARY = None
