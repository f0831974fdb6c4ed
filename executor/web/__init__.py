"""``corral serve``: the web front door. Watch children live, compare candidates side by
side, apply one; in a browser on this machine only.

- :mod:`executor.web.command`: the ``serve`` command (loaded by name from the CLI's
  table, so no other command imports the web stack);
- :mod:`executor.web.guard`: Host, Origin and token checks, and the security headers;
- :mod:`executor.web.app`: the pages, over :class:`executor.api.Corral` only;
- :mod:`executor.web.views`, :mod:`executor.web.diffs`, :mod:`executor.web.starts`:
  what the pages show, the diff with syntax colour, runs started from the start page.
"""
