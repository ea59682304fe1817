"""Credentials in URLs: split once where a URL comes in, masked everywhere it goes out.

An endpoint URL an operator types (``bench --endpoint``, ``deploy --endpoint``, a playbook's
``endpoint:``) may hold a password (``ws://user:PW@host``) or a token in its query
(``?token=...``). :func:`split_url` turns it into a :class:`SecretURL` at the edge: its ``str()``
is the masked address (``ws://user:***@host``), which is all that is ever stored, printed, logged
or put on a device's command line; :meth:`SecretURL.reveal` gives the whole URL to the lab-side
client that connects, in memory only. A device process that must connect itself gets the masked
URL on its command line and the secret in its environment (:meth:`SecretURL.device_env`, passed
over the launch command's stdin), and puts them back together with :func:`from_device_env`.

:func:`mask_text` is the one masking of URLs inside free text (errors, log records, remote
command lines): the log handler (:func:`edgelab.logs.redact`) and the CLI's error lines use it.
Standard library only: the reference zipapp on a device packs this module.
"""

from __future__ import annotations

import os
import re
from urllib.parse import parse_qsl, quote, unquote, urlencode, urlsplit, urlunsplit

MASK = "***"
DEVICE_SECRET_ENV = "EDGELAB_SERVER_SECRET"
"""The environment variable that carries a device-side endpoint's password (never its argv)."""

# query parameters whose value is a credential (``?token=``, ``?api_key=``, ``?sig=`` ...)
_SECRET_PARAM = re.compile(
    r"(?:password|passwd|pass|pwd|secret|token|api[_-]?key|apikey|access[_-]?key|auth|key|sig|signature"
    r"|credential|session)$|(?:_token|_secret|_key|-token|-secret|-key)$",
    re.I,
)
# scheme://user:password@ inside free text: the password runs to the last @ of the word (an
# unencoded @ or / in a password must not leave its tail shown; a path's @ is masked with it)
_USERINFO = re.compile(r"(\b[a-z][a-z0-9+.-]*://[^\s:/@]*):(?:[^\s@]*@)+", re.I)
# scheme://host/...?name=value: a secret-looking query parameter's value
_QUERY = re.compile(
    r"(\b[a-z][a-z0-9+.-]*://[^\s?#]*\?(?:[^\s#]*?[?&;])?)"  # up to the parameter
    r"([\w.-]*(?:password|passwd|pwd|secret|token|api[_-]?key|apikey|access[_-]?key|auth|sig)[\w.-]*=)"
    r"(?!\*\*\*(?:[\s&;#\"']|$))([^\s&;#\"']+)",
    re.I,
)


def mask_text(text: str) -> str:
    """``text`` with the password of every ``scheme://user:password@`` URL and every secret-looking
    query value replaced by ``***`` (errors, log records, command lines; idempotent)."""
    if "://" not in text:
        return text
    text = _USERINFO.sub(rf"\1:{MASK}@", text)
    while True:  # one parameter per pass: a URL may carry several
        new = _QUERY.sub(rf"\1\2{MASK}", text)
        if new == text:
            return text
        text = new


def _secret_param(name: str) -> bool:
    return bool(_SECRET_PARAM.search(name))


class SecretURL:
    """A URL whose credentials never leave memory: ``str()`` is the masked form (``shown``).

    ``password`` is the userinfo's password, ``query_secrets`` the secret query values; ``reveal()``
    is the URL as typed, for the one client that connects. Equal when the whole URLs are equal.
    """

    __slots__ = ("_full", "password", "query_secrets", "shown")

    def __init__(self, url: str):
        url = str(url).strip()
        self._full = url
        self.password: str | None = None
        self.query_secrets: dict[str, str] = {}
        try:
            parts = urlsplit(url)
            parts.port  # noqa: B018 - a port that is no number raises ValueError here
        except ValueError:  # its message may quote a piece of the password: not shown
            from edgelab.errors import ConfigError

            raise ConfigError(
                f"{mask_text(url)} is not a URL edgelab can take apart (its host or port part is malformed)",
                remedy="percent-encode @ : / in a password (%40 %3A %2F), e.g. ws://user:p%40ss@HOST:PORT",
            ) from None
        netloc = parts.netloc
        if "@" in netloc:
            userinfo, _, hostport = netloc.rpartition("@")
            user, sep, password = userinfo.partition(":")
            if sep:
                self.password = unquote(password)
                netloc = f"{user}:{MASK}@{hostport}"
        query = parts.query
        if query:
            pairs = parse_qsl(query, keep_blank_values=True)
            if any(_secret_param(k) for k, _ in pairs):
                self.query_secrets = {k: v for k, v in pairs if _secret_param(k)}
                query = urlencode([(k, MASK if _secret_param(k) else v) for k, v in pairs], safe="*")
        self.shown = urlunsplit((parts.scheme, netloc, parts.path, query, parts.fragment))

    @property
    def has_secret(self) -> bool:
        return self.password is not None or bool(self.query_secrets)

    def reveal(self) -> str:
        """The URL with its credentials: for the lab-side client that connects, never for output."""
        return self._full

    def device_env(self) -> dict[str, str]:
        """What a device process needs besides the masked URL on its argv: the password, by environment."""
        if not self.has_secret:
            return {}
        return {DEVICE_SECRET_ENV: quote(self.password or "", safe="") + "&" + urlencode(self.query_secrets)}

    def __str__(self) -> str:
        return self.shown

    def __repr__(self) -> str:
        return f"SecretURL({self.shown!r})"

    def __eq__(self, other: object) -> bool:
        return isinstance(other, SecretURL) and other._full == self._full

    def __hash__(self) -> int:
        return hash(self._full)

    def __bool__(self) -> bool:
        return bool(self._full)


def split_url(url: str | SecretURL | None) -> SecretURL | None:
    """The one place a typed URL becomes a :class:`SecretURL` (None and '' stay None)."""
    if url is None or isinstance(url, SecretURL):
        return url
    return SecretURL(url) if str(url).strip() else None


def mask_url(url: str | SecretURL | None) -> str | None:
    """The masked form of one URL (what is stored and shown)."""
    s = split_url(url)
    return None if s is None else s.shown


def from_device_env(shown: str, environ: dict[str, str] | None = None) -> str:
    """On the device: the masked URL from argv with the secret from :data:`DEVICE_SECRET_ENV` put back."""
    env = os.environ if environ is None else environ
    packed = env.get(DEVICE_SECRET_ENV)
    if not packed:
        return shown
    password_q, _, query = packed.partition("&")
    password = unquote(password_q)
    secrets = dict(parse_qsl(query, keep_blank_values=True))
    parts = urlsplit(shown)
    netloc = parts.netloc
    if "@" in netloc and password:
        userinfo, _, hostport = netloc.rpartition("@")
        user = userinfo.partition(":")[0]
        netloc = f"{user}:{quote(password, safe='')}@{hostport}"
    q = parts.query
    if secrets and q:
        q = urlencode([(k, secrets.get(k, v)) for k, v in parse_qsl(q, keep_blank_values=True)])
    return urlunsplit((parts.scheme, netloc, parts.path, q, parts.fragment))
