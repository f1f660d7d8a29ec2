"""A made-up sub-command (`launcher fakes-hello`), registered as any is: this module and one
entry-point line (`launcher.commands`). Its flags are its request's; launcher prints what it
says, or its data under --json."""

from __future__ import annotations

from dataclasses import dataclass

from launcher.commands import Command, Said
from launcher.flags import Flag, flag


@dataclass(frozen=True, kw_only=True)
class HelloRequest:
    who: str = flag(Flag(("--who",), "Whom to greet."), "world")
    times: int = flag(Flag(("--times",), "How many times.", kind="int", minimum=1), 1)


def hello(req: HelloRequest) -> Said:
    lines = [f"hello {req.who}"] * req.times
    return Said(lines=lines, data={"who": req.who, "times": req.times},
                notes=["said by launcher-fakes"])


COMMAND = Command(help="Greet someone (a third party's sub-command).", request=HelloRequest,
                  run=hello)
