"""``gridcoll netns``: a grid as a real network of namespaces on this machine.

``gridcoll netns up magpie:4,2`` makes one network namespace per cluster, joined through
router namespaces (one per site, and a core) by veth pairs shaped to the grid's
bandwidths
(:mod:`gridcoll.runtime.netns`), and prints how to use it; ``gridcoll netns down``
removes it. With ``--run COMMAND``, the network lives only while the command runs and is
removed however it ends (Ctrl-C, SIGTERM, SIGHUP included). ``gridcoll netns
status`` lists the networks that are up.
"""

from __future__ import annotations

import argparse
import shlex
import subprocess

from gridcoll.cli._common import console, load_grid_arg, print_json
from gridcoll.errors import LaunchError, ParameterError

__all__ = ["add_parser", "run"]


def add_parser(subparsers: argparse._SubParsersAction) -> None:
    """Add the ``netns`` subcommand."""
    parser = subparsers.add_parser(
        "netns",
        help="make a grid a real network of namespaces on this machine (root): up, down, status",
        description=(
            "up GRID: one network namespace per cluster, joined through routers (one per "
            "site, and a core) by veth pairs shaped with htb to the grid's link "
            "bandwidths (latency is not emulated: "
            "the kernel has no netem here). Then --netns on mpirun, run, measure and "
            "discover places each rank in its cluster's namespace, MPI over TCP. "
            "down [NAME]: remove it. status: what is up. Example: gridcoll netns up "
            "magpie:4,2; gridcoll discover --grid magpie:4,2 --netns --out found.json; "
            "gridcoll run --grid found.json --netns --size 1MiB; gridcoll netns down. "
            "With --run COMMAND, the network lives only while COMMAND runs."
        ),
    )
    parser.add_argument("action", choices=("up", "down", "status"))
    parser.add_argument("grid", nargs="?", default=None, metavar="GRID|NAME")
    parser.add_argument(
        "--name", default=None, metavar="NAME", help="the network's name (default: gridcoll)"
    )
    parser.add_argument(
        "--grid-out",
        default=None,
        metavar="FILE",
        help="up: also write the grid placing its ranks by the sites' host names",
    )
    parser.add_argument("--json", action="store_true", help="print one JSON object")
    parser.add_argument(
        "--run",
        default=None,
        metavar="COMMAND",
        help="up: run COMMAND (one string, split as a shell would) with the network up, "
        "then remove it however COMMAND ends; the exit status is COMMAND's",
    )
    parser.set_defaults(func=run)


def _describe(net) -> dict:
    return {
        "name": net.name,
        "grid": net.grid.name,
        "core": net.core,
        "routers": list(net.routers),
        "sites": [
            {
                "cluster": net.grid.clusters[s.cluster].name,
                "namespace": s.namespace,
                "host": s.host,
                "address": s.address,
                "ranks": net.grid.members[s.cluster],
            }
            for s in net.sites
        ],
        "shapers": [
            {
                "link": sh.link,
                "namespace": sh.namespace,
                "device": sh.device,
                "rate_bit_s": sh.ceil,
            }
            for sh in net.shapers
            if not sh.is_leaf
        ],
    }


def run(args: argparse.Namespace) -> int:
    """Bring a network up or down, or list them; return the command's exit status."""
    from gridcoll.network.gridfile import save_grid
    from gridcoll.runtime import netns

    command = shlex.split(args.run) if args.run is not None else []
    if args.run is not None and (args.action != "up" or not command):
        raise ParameterError("--run takes a command, with netns up only")
    if args.action == "down":
        name = args.name or args.grid or netns.DEFAULT_NAME
        gone = netns.down(name)
        if args.json:
            print_json({"name": name, "removed": gone})
        else:
            console().print(
                f"{name}: removed {len(gone)} namespaces" if gone else f"{name}: none up"
            )
        return 0
    if args.action == "status":
        nets = []
        for path in sorted(netns.STATE_DIR.glob("*.json")) if netns.STATE_DIR.is_dir() else []:
            try:
                nets.append(_describe(netns.find(path.stem)))
            except Exception as err:  # a record whose namespaces are gone
                nets.append({"name": path.stem, "error": str(err)})
        if args.json:
            print_json({"networks": nets})
        else:
            out = console()
            for net in nets:
                out.print(_summary(net))
            if not nets:
                out.print("no namespace network is up")
        return 0
    if args.grid is None:
        raise ParameterError("netns up needs a GRID: gridcoll netns up magpie:4,2")
    grid = load_grid_arg(args.grid)
    net = netns.plan(grid, name=args.name or netns.DEFAULT_NAME)
    netns.up(net)
    try:
        if args.grid_out:
            save_grid(net.host_grid, args.grid_out)
        if args.json:
            print_json(_describe(net))
        else:
            console().print(_summary(_describe(net)))
        if not command and not args.json:
            console().print(
                f"use it: gridcoll mpirun --grid {args.grid} --netns -- python app.py; "
                f"remove it: gridcoll netns down {net.name}"
            )
        if not command:
            return 0
        try:
            return subprocess.run(command, check=False).returncode
        except OSError as err:
            raise LaunchError(f"cannot run {command[0]!r}: {err.strerror}") from None
    finally:
        if command:
            netns.down(net.name)


def _summary(desc: dict) -> str:
    if "error" in desc:
        return f"{desc['name']}: {desc['error']}"
    routers = ", ".join(desc["routers"])
    lines = [f"{desc['name']}: grid {desc['grid']}, core {desc['core']}, site routers {routers}"]
    for site in desc["sites"]:
        ranks = site["ranks"]
        lines.append(
            f"  {site['cluster']}: namespace {site['namespace']}, host {site['host']}, "
            f"{site['address']}, ranks {', '.join(map(str, ranks))}"
        )
    for sh in desc["shapers"]:
        where = f"{sh['namespace']}/{sh['device']}"
        lines.append(f"  link {sh['link']}: {sh['rate_bit_s'] / 1e6:g} Mbit/s on {where}")
    return "\n".join(lines)
