"""Recognise a provider reply that is not an API answer at all (a proxy's or captive portal's HTML page)."""

from __future__ import annotations

import re

# lm15 words a body that is not JSON as "the reply (HTTP 200, text/html, 46 bytes) is not JSON: ...".
_NOT_JSON = re.compile(r"the reply \(HTTP (\d{3}), ([^,]*), \d+ bytes\) is not JSON")


def non_json_reply(exc: BaseException) -> str | None:
    """A short description ("HTTP 200 text/html reply, not JSON") when ``exc`` reports a successful-status
    reply whose body is not JSON; None otherwise. The chain retries these as transport errors: the
    endpoint answered, but not the API (a gateway's login or error page), and a retry may reach it."""
    found = _NOT_JSON.search(str(exc))
    if found is None:
        return None
    status, content_type = int(found.group(1)), found.group(2).strip()
    if status >= 300:
        return None  # an error status is classified by its status
    return f"HTTP {status} {content_type} reply, not JSON (a proxy or gateway page?)"
