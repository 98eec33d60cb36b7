"""A cap on the request bodies ``pcm serve`` holds at once, so slow uploads cannot add up to the machine's memory.

Each body is capped (``--max-body-mb``) and so are connections (:mod:`pcm.endpoint.connections`), but their product
is not: 64 connections each trickling a 16 MB body would have the front hold a gigabyte, every byte of which it keeps
until the request is answered (the routes read a body whole before their handler runs). :class:`BodyBudget` bounds
the sum. A request reserves its ``Content-Length`` before a byte of its body is read; when the reservation would
pass the budget the request is answered 503 with ``Retry-After`` and the connection closed, and since uvicorn sends
``100 Continue`` only once the application asks for the body, a client that waits for it never uploads. A chunked
body has no length to reserve: :class:`Metered` charges its pieces as they arrive and stops it at the budget. What a
request reserved is given back when it has been answered.

Everything here runs on the server's event loop, one request step at a time, so the counts need no lock.
"""

from __future__ import annotations

from starlette.types import Message, Receive


class OverBudget(Exception):
    """A chunked body grew past what the budget had left."""


class BodyBudget:
    """Bytes of request bodies being received or held by requests not yet answered, against a limit."""

    def __init__(self, limit: int) -> None:
        self.limit = limit
        self.held = 0

    def reserve(self, size: int) -> bool:
        """Take ``size`` bytes if they fit; False (nothing taken) if they do not."""
        if self.held + size > self.limit:
            return False
        self.held += size
        return True

    def release(self, size: int) -> None:
        self.held -= size


class Metered:
    """``receive`` for one request, charging to the budget the body bytes beyond what the request reserved (a
    chunked body reserved nothing); :meth:`release` gives everything back once the request is answered."""

    def __init__(self, receive: Receive, budget: BodyBudget, reserved: int) -> None:
        self.receive = receive
        self.budget = budget
        self.reserved = reserved
        self.received = 0

    async def __call__(self) -> Message:
        message = await self.receive()
        if message["type"] == "http.request":
            self.received += len(message.get("body", b""))
            if self.received > self.reserved:
                if not self.budget.reserve(self.received - self.reserved):
                    raise OverBudget
                self.reserved = self.received
        return message

    def release(self) -> None:
        self.budget.release(self.reserved)
        self.reserved = 0
