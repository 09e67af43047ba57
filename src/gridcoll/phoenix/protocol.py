"""Phoenix (seed 004): one process of the protocol, as a sans-I/O state machine.

Saito, Taura and Chikayama (seed 004) let processes join and leave a computation while
broadcasts and reductions go on: messages are addressed to virtual nodes (sec. III),
each process measures the network with random probes and keeps, for every root, a
latency-aware and a bandwidth-aware spanning tree (sec. IV-A to IV-C); a broadcast
carries per child the set of virtual nodes to reach through it and falls back to
point-to-point messages (sec. IV-D); a reduction waits for its children only until a
timeout (sec. IV-E). :class:`Process` is that protocol for one process, written in the
style of h11: it is fed events and returns actions, and does no I/O, reads no clock
and draws random numbers only from the ``random.Random`` it is given.

Rules
-----
1. This module does not know how messages travel. A *driver* moves each
   :class:`Send` to ``dst`` and feeds it there as :class:`Received`, FIFO per ordered
   pair of processes and in any order across pairs; performs each :class:`Probe` (a
   1-byte ping-pong and a 128 KiB download, sec. IV-A) and feeds :class:`ProbeResult`
   (``rtt_s = inf`` if the peer is unreachable); and feeds :class:`TimerExpired` after
   each :class:`SetTimer`'s delay. A later :class:`SetTimer` with the same key
   replaces the earlier. It keeps delivering to LEFT processes (see "Stragglers").
   It feeds :class:`PeerFailed` only for a process that will never send again
   (see "Failures").
2. Process ids are never reused: a machine that comes back joins under a new id.
3. Founders are given the whole vnode mapping and are fed :class:`Start`; other
   processes start IDLE and are fed :class:`JoinRequested`.
4. Any exception inside :meth:`Process.handle` puts the process in ``ERROR`` with the
   reason in ``error``; every later event raises :class:`LocalProtocolError`.
5. A driver that has several events at hand (a busy process's backlog) may feed them
   together (:meth:`Process.handle_all`): a run of tree updates (ChildUpdates,
   ParentUpdates) in a row then sends the updates it causes once, after the run.

States and transitions (``TRANSITIONS`` is the table)
-----------------------------------------------------
``IDLE --Start--> ACTIVE`` (founder); ``IDLE --JoinRequested--> JOINING --Welcome-->
ACTIVE``; ``ACTIVE --LeaveRequested--> LEAVING --last LeaveAck--> LEFT``; any state
``--exception--> ERROR``. A LEFT process only forwards stragglers (below).
:class:`PeerFailed` changes no state (a JOINING, ACTIVE, LEAVING or LEFT process
takes it).

Theory of operation
-------------------
*Membership.* A joiner asks a member (JoinRequest); the member (its sponsor) answers
Welcome (the members and its routing table) and hands it half of its vnodes (Handover).
The joiner tells each member of its Welcome that it joined (an Update naming itself).
Whoever learns of a new member from a third party (an Update naming it) tells it that
it is a member the same way, and a sponsor names to each joiner it welcomed every
member it learns of later, from an Update or, leaving, from a LeaveAck. So no Update or
Info carries a member list, and membership still reaches its fixed point when joins
cross: of two members A and B, say B joined later; if A was in B's Welcome, B tells A;
if not, B's sponsor S (which joined before B) learns of A, by the same argument for the
pair (S, A), and names A to B, which tells A (induction on the later join; the founders
know each other; a sponsor that leaves learns, from the acks it waits for, every
member its ackers know). A leaver hands all its
vnodes to an heir, sends Leaving (with the routing entries of the vnodes it handed over
while leaving: forwarding pointers; every earlier change of its reached every member as
an Update, FIFO before the Leaving) to every member, and stays LEAVING, forwarding what
still reaches it, until every member it knows of has acknowledged. An ack lists the
acker's members (but the founders, to a leaver founded with it: it knows them), so a
member the leaver did not know of is asked too. Since channels are FIFO, everything a
member sent to the leaver before its ack reaches the leaver before the ack, and a member
that processed a Leaving never again points at the leaver. If a LEAVING process is
handed vnodes (by someone who had not yet heard it leave), it passes them on and asks
every member to ack again (a new round), so no member keeps a pointer to it for them.

*Stragglers.* One gap remains: a leaver L that processed another leaver X's Leaving
no longer hears of X's later changes, so if X is handed vnodes while leaving, L may
still forward a message to X on a stale pointer after X is LEFT. A LEFT process
therefore still takes messages: it forwards broadcasts (those that came along a tree
along the children it had, see "Repair"), partial sums and vnodes along its own
pointers (which only point forward in a vnode's history), answers Leaving and
InfoRequest, refuses a JoinRequest with the members it knew (JoinRefused: the joiner
asks one of them; they left later than it or not at all, so this ends), drops the
rest, and counts them in ``stragglers``. A real deployment must
keep a left endpoint forwarding for a grace period; closing the gap needs termination
detection among concurrent leavers (the runtime issue).

*Vnodes.* :mod:`gridcoll.phoenix.vnodes`: ownership, epochs, forwarding pointers. The
broadcast ids delivered to a vnode and the reductions it contributed to travel with it.

*Failures (beyond the paper, which assumes polite leaves).* The driver's failure
detector (heartbeats) feeds :class:`PeerFailed` for a process that died. Then:

- *Membership and trees.* The dead process is dropped as if it had left, except that
  it forwards nothing: it is no "former" child, a leaver drops it from the children
  it kept, and messages it sent before dying count only if they carry data, vnodes
  or where it sent vnodes (Bcast, Partial, Handover, Update); children it had
  climb to their nearest live ancestor ("Repair"). A process handed a vnode that its
  table gives to a third process, once a failure is known, claims it (that one may
  have taken it over); a process told it owns a vnode that its table gives to a dead
  process takes it over (the handover died with its sender).
- *Its vnodes.* Its heir is the next member id after it, cyclically, among the members
  of its site if one is left, else among all (a LEAVING or LEFT process counts itself
  out; an id's top bits name its site, :data:`SITE_SHIFT`); the heir takes every vnode
  its table gives the dead process at the next epoch, with a fresh *recovered* state,
  and claims them to every member (``Update``); every other survivor sends the heir
  the entries its table gives the dead process, since the heir's table may be older.
  A message for a vnode whose owner is dead goes to the heir as the sender sees it; a
  process that finds itself the heir takes the vnodes over then. Disagreements (different member
  lists, stale pointers, a handover that died with its sender: its receiver says it
  had the vnode at the dead process) are settled by the epochs of
  :mod:`~gridcoll.phoenix.vnodes` ("Failover"); an owner of a recovered vnode claims
  it again when it is handed to it, and to each member it learns of, so two claimants
  always hear of each other; an owner gives a vnode up only to its claimant's own
  claim (a third party's entry may name a handover that died), and tells a claimant
  that lost to it so, once it knows the claimant as a member if the claim came first
  (a joiner's claim can arrive before the news that it joined). A process that
  becomes the heir later (the heir left or died) takes the orphans over then. A
  point-to-point message past ``2 P + 2`` hops is going round tables that disagree
  about a dead owner: the active process holding it takes that owner's vnodes over.
- *Broadcasts in flight.* Each process keeps the messages of its last ``resend_ops``
  broadcasts; those it sent to the dead process after the last one the dead process
  confirmed passing on (``PeerFailed.received``, from its heartbeats; all kept ones if
  unknown) are sent again (``resent``) to the owners of their targets, leaving out the
  dead process's own vnodes for a broadcast it had taken in whole
  (``PeerFailed.delivered``, a later heartbeat: it delivered it; its heir is sent every
  segment of a broadcast it had only part of, for a recovered vnode's history starts
  empty). A message sent again goes down a chain of owners, each delivering its own
  vnodes and passing the rest on to the owner it measured nearest, so the payload
  crosses each wide-area link once (rule III's binomial relay would send it over the
  same link to several owners of a remote LAN). (A count trusts that what the dead
  process took in, it passed on to live processes: a message it passed only to another
  process that then died before passing it on is not sent again; the processes below ask
  for it, next. Without a count nothing kept is lost.) A vnode that already has a
  segment drops the copy (``duplicates``; once a failure is known here, or for a
  broadcast a vnode has ended, any second copy is dropped), so every vnode of a live
  process gets every segment of a broadcast whose root survives. A recovered vnode's
  history is lost: it may get a segment again that it had at the dead process or, before
  a handover that died, at another. A pipelined broadcast whose root process died is
  reported as :class:`Abandoned` for the vnodes holding only some of its segments, and
  ends there (it counts as delivered: later copies are dropped). A leaver that every
  member it knows of died under (the joiners that live on were announced by a process
  that died too) has no live process to send a message to: it reports the vnodes as
  :class:`Abandoned` for that broadcast instead of sending to the dead.
- *Broadcasts that stop coming.* After a failure a process watches every pipelined
  broadcast its vnodes have only part of, and every one a vnode it took over is sent
  again (a recovered vnode starts empty; it is taken over holding none of the broadcasts
  the heir's own vnodes have part of, as the dead process may have had them whole and
  nobody sends them). Every ``stall_s`` it looks; if no segment came since the last
  look, it takes what its vnodes lack from the copies it kept of what it sent, and asks
  its parent in the broadcast's tree for the rest (:class:`Want`: every segment some
  vnode of ours lacks, for our whole subtree). The parent sends the copies it kept down
  the tree to the asker, and asks its own parent for the rest, unless it lacks them too
  (then its own ask covers the asker's subtree). The interval doubles after each ask;
  after ``WANTS`` asks that brought nothing the broadcast is ended for those vnodes and
  reported (:class:`Abandoned`). So the segments a chain of dead processes took with it
  reach every live process below it (figures: docs/phoenix.md, "The evidence
  behind protocol.py's rules"). Still uncovered: a vnode whose dead owner's senders all
  died too, when its heir knew nothing of a broadcast under way (none of its own vnodes
  had part of it), lacks what its dead owner lacked, unreported.
- *Reductions.* A recovered vnode's data goes aside, point-to-point to the root
  vnode, which counts it only if no other contribution covers that vnode when the
  reduction ends (the dead process may have sent it already). The owner of the root
  vnode ends a reduction at once when only the dead process's vnodes are missing,
  and reports them missing; a root vnode whose owner died is taken over with the
  reductions the heir knows of (one that had ended may end again there).
- Each survivor reports :class:`PeerLost`: the vnodes it had mapped to the dead
  process, the heir, and the broadcasts it sent again.

A process reported dead that is alive (a false suspicion) loses its vnodes to the
heir: at the first claim it hears, it gives each up.

*Trees.* For each member ``r`` and each kind (latency, bandwidth) a process keeps its
parent, what it measured to the parent, its distance (latency) or estimated rate
(bandwidth), its ancestors, and for each child the vnodes the child reaches and a
:class:`~gridcoll.phoenix.trees.Summary` of its subtree. A process probes one peer at
a time (Probe to the driver, InfoRequest to the peer, whose Info carries its place in
every tree, sec. IV-B; while the only trees without a parent are those of members
that joined since it first had a parent everywhere, it asks for those trees only,
``InfoRequest.roots``) until it has a parent in every tree, then ``extra_probes`` more,
then up to ``chain_probes`` more while it sees itself as a LAN gateway behind another
remote LAN (:func:`~gridcoll.phoenix.trees.chained`; with ``remote_probes``, also
while its parent in any tree is remote; that budget is renewed with the extra
probes, below); the rules are :mod:`gridcoll.phoenix.trees`. With ``roots``, a process
keeps only those roots' trees (a static builder's cheaper run). Losing a parent
(its leave, or a cycle) renews the extra probes, as the paper's repair does. A peer
is measured once (``remember``): a later probe of it sends only the InfoRequest (its
place in the trees changes, the link to it is taken not to), which spares the
wide-area links a 128 KiB download per repeated probe. Moving sends an attach to the
new parent and, once the new parent's first position update shows it took us, a
detach to the old one (make before break: a broadcast passing meanwhile finds the
subtree in one of the two parents' reach sets instead of falling back to one
point-to-point message per vnode; Invariant B does not need reach sets disjoint).
Positions flow down (a parent's distance, rate, child count and ancestors), reach sets
and summaries flow up. A process that finds itself among its own ancestors (two crossing
moves made a cycle) drops its parent and probes again if it has the highest id in the
cycle; the others keep theirs and pass the positions on, so the highest id hears of the
cycle and ends it alone (when each dropped its parent, two LAN peers below one remote
parent could each move below the other again at the end of the next round, for ever).
A new member (a new tree) or a lost parent restarts the probing; probing that found a
parent in a joiner's new trees renews the extra and chain probes (sec. IV-A); a tree
given a parent without probing (a copy, "Joins") renews none, nor does probing after a
loss (the Adopt renews the extra probes, see "Repair"). *Better measurements.* A
driver that measures a peer's RTT again and finds it lower than what the process holds
(a real ping-pong is slowed by whatever else the two machines do; heartbeats give more
samples over time) feeds
:class:`Remeasured`: the process keeps the lower RTT (and the rate recomputed with it,
if the driver can) and probes that peer once more (an InfoRequest: it is measured), so
each tree is judged again with it, even after probing had ended.

*Repair (sec. IV-A, made faster).* The paper repairs a tree by probing: a process whose
parent left probes random peers until it has a parent again, then 10 more. Each probe
downloads 128 KiB, so over thin wide-area links a repair by probing takes seconds per
probe, and meanwhile the leaver's whole subtree is reached point-to-point. Here a leaver
first sends each child, for every tree, an Adopt before its Leaving (FIFO: the child
acts on the Adopt first). Its nearest child (smallest RTT to the leaver, then most
descendants) is told to take the leaver's place below the leaver's parent, the other
children to move below that child, so the leaver's subtree stays one subtree and a LAN
reached through the leaver keeps a single wide-area edge (Property I). A child moves at
once, without probing; its RTT to its new parent is bounded by the sum through the
leaver and its bandwidth by the smaller of the two (the leaver's own measurements,
carried in the Adopt), and its distance and rate are recomputed when the new parent
sends its position. The tree stays connected and no reach set is lost for longer than
the Adopt and the attach take. Then the child renews its extra probes and improves by
the paper's rules; a probe of the adopted parent replaces the bounds by measurements. A
LEAVING or LEFT process that is attached to (its Adopt crossed, or the new parent leaves
too) answers with an Adopt to its own parent when it left, so the child climbs towards
the root. At most as many adoptions in a row as there are members are taken (a cycle of
leavers' parents cannot loop). For every child but the nearest, the Adopt also names
fallbacks (``AdoptItem.fallback``): the nearer siblings, then the leaver's parent. When
several neighbours leave at once (half the processes in fig. 9) the nearest child may be
leaving too; the child takes the first one named that it has not seen leave and keeps
the rest, so the next nearest takes the place and the LAN still hangs on one edge. An
Adopt reaching a child that moved meanwhile is ignored.

*Climbing.* A child whose parent is gone with no Adopt it could use (every process named
left, or a crash) does not probe for a new parent: at the Leaving (or the failure) it
attaches at once to the next fallback it kept, else to the nearest ancestor on its path
still a member, on bounds: the measured hop if it ever probed that process; for a
sibling fallback, the old hop's figures, as for an Adopt (it is nearer the leaver than
the child is); for an ancestor or the last fallback (the leaver's parent, often across
the wide area), the route it had from it, as an Adopt's bounds are: its
distance for the RTT and its rate for the bandwidth (``estimated``; the old hop's
figures, a LAN hop's below a wide-area one, would tell the ancestor that a child across
the wide area is in its LAN, and its model would pick the wrong tree), and it probes
that process next, by pings only if a peer it measured has an RTT within ``NOISE_SLACK``
of the ping's (that peer is behind the same links: its rate stands for the ancestor's),
else with the download. Only a process with no live ancestor disconnects and probes, as
the paper's. Without climbing, every descendant of a disconnected process sees its rate
or distance drop to nothing and jumps to the first connected peer it probes, often
across the wide area.

*Probes after a loss.* The extra probes a loss renews go only to peers already measured,
whose probe costs one InfoRequest (``_probe_candidates``): a leave or a death brings no
one new to measure, and 128 KiB downloads over the wide area slow the very broadcasts
the repair is for. So do those after a join, but only once a process has made
``extra_probes`` probes among every member: a cluster's first process, whose LAN joins
through it right after it joined, has measured little more than its sponsor, and would
never measure anyone else (the group formed as the measured experiments form it, 12
processes on three LANs in the in-memory driver, seeds 0-9: the LAN whose links are
0.6 and 0.75 MB/s entered from the 0.6 MB/s side in 21 of the 40 bandwidth trees
rooted in the third LAN, now 7). With a parent in every tree they ask only about the
trees they are for (``InfoRequest.roots``, :meth:`Process._wanted`; probes under way
for every tree, settling or after a join or a cycle, go on so): an extra probe about
the trees repaired since the probes last ran out (a loss's, and any tree that moved
since: a tree left without a route to its root takes the first connected peer a probe
finds, often across a slower link), a probe of an ancestor climbed to about the trees
hung on it, a chain probe about the chained trees (an Info carries a position per tree
asked about). Every probe also names, in each tree asked about with a parent other
than the peer, the worst distance and rate the rules could take there
(``InfoRequest.bars``,
:func:`~gridcoll.phoenix.trees.latency_bar`,
:func:`~gridcoll.phoenix.trees.bandwidth_bar`), through the link to that peer if we
measured it (the probe judges with those figures: a distance less its RTT, a rate its
class's threshold, and no rate at all if the link's own cannot pass), and the peer
leaves the other positions out of its Info: most of a settled member's positions cannot
win, and the replies of a mass leave's probes share the wide-area links with the
broadcasts (at 160 processes, Leiden members asked UvA peers about the bandwidth trees
the leave repaired: at 0.74 MB/s, their own rate and that of the link between, no UvA
position could win). A probe after a loss goes first to a LAN peer (measured, in our LAN
class; each once per tree, while extra probes are left), asking about the repaired trees
we now hang on a remote parent by (``_sweep``), while there are any: when a LAN's
gateway and the LAN ancestors of a member leave together, the member climbs to the
remote process above them while another member takes the gateway's place, and a LAN
member reached already offers the same rate and distance (up to the noise) over the LAN,
so the nearer-class rules move it there and the LAN keeps one wide-area edge. Then,
extra probes left or not, to each measured remote peer whose link alone beats the rate
of such a bandwidth tree by the hysteresis (an offer is at most the link's rate), asking
about those trees: a LAN's gateway whose remote ancestors all leave climbs, is adopted,
or probes its way to whatever is left above them, often across a slower link, and random
extra probes may never reach the few peers behind the faster one (fig. 9's leave on
``das2-spread:64,4``, simulated, seed 8: Leiden's gateway, its UvA ancestors gone, below
VU at 0.61 MB/s, its measured UvA peers at 0.74 never asked, every later broadcast 6.73
s instead of 5.61 s). A tree that moves onto a remote parent after a loss is swept
afresh, its LAN first, extra probes left or not (``_moved``): a member of a LAN cut off
from the root takes the first connected peer it finds, and may reach a faster link by
the remote sweep while a LAN peer it asked before the move has become the LAN's gateway
since (``das2-spread:160,4``, seed 2: two Delft members below two UvA processes, both
flows on the one UvA-Delft link, 8.98 s broadcasts to the end). A round of probes that
asked about every tree (settling, a join's) ends with the same sweep, of the trees it
left on a remote parent, a joiner that borrowed included: random probes leave LAN
members on wide-area parents (one root on ``das2:9``, seed 0: 7 and 4 wide-area edges
into 3 other clusters, now 3 and 3), and on real processes a LAN that joins through its
first member all at once, before that member has measured anyone, borrows nothing and
left root 0's bandwidth tree with 4-6 wide-area edges instead of 3 in diagnostic runs
(broadcasts 0.44-0.73 s instead of 0.38). A parent known only by bounds (a climb to an
ancestor never measured) is measured even with no extra probe left. A tree with no parent
probes its root if measured, else measured peers (one round each), else anyone.

A LEAVING or LEFT process keeps the children it had when it left (no longer updated, not
even when they leave) and forwards a tree broadcast that still reaches it along them, as
before: they reach what they reached (alive, or forwarding the same way), whereas one
point-to-point message per vnode of its subtree would carry the whole payload once per
vnode. For the same reason a parent remembers the last reach set of each child that
moved away or left (until it comes back) and sends a tree broadcast's targets that none
of its children reaches but such a former child did to that child, which forwards them
down its subtree of now (a leaver: along its old children), rather than point-to-point:
a move or a leave while a broadcast is on its way (before the new parent's branch or the
adopted child's attach has the subtree) costs one message, not one per vnode. A child
whose reach set shrinks is remembered so for the vnodes it no longer reaches, and a
vnode is remembered only at the child that reached it last (a stale entry, kept since
the child left long ago, would send the payload over the wide area again down an old
path): a vnode handed to a joiner leaves its sponsor's reach before the joiner's attach
brings it back up the tree, and meanwhile a broadcast's target for it goes down that
child in the message the child gets anyway, then from the sponsor to its owner in the
LAN, instead of point-to-point from high up the tree. Any split of a target set keeps
Invariant B, and the hop bound ends a cycle. (Figures: docs/phoenix.md, "The
evidence behind protocol.py's rules".)

*Joins (sec. IV-A, made cheaper).* A joiner's first probe is the member that welcomed it
(a live member connected to every tree: a parent in every tree after one probe). The
paper then has every process probe random peers again, and every probe of a process not
yet measured downloads 128 KiB, most of them over the wide area, under the broadcasts.
Processes of one LAN measure the rest of the network alike, so: the Welcome carries what
the member measured (``Welcome.measured``, its smallest RTT ``lan_rtt``); a joiner whose
probe of its sponsor is in the sponsor's LAN class (RTT within ``NEAR_RATIO`` of the
sponsor's ``lan_rtt``) takes those figures as its own and tells every member it is near
the sponsor (:class:`Near`); a member that measured the sponsor takes the sponsor's
figures for the joiner, and the sponsor the joiner's figures for their link (``Near``
carries them: a sponsor its LAN joined through has measured none of it otherwise). A
sponsor that has measured no one offers nothing: its ``lan_rtt`` would be infinite, and
every joiner would look near it; such a joiner sends no ``Near``, so the sponsor's next
probes go to the joiners it lent nothing (``_lent_nothing``), which measures its LAN if
the LAN joined through it. Without it, that sponsor, its smallest RTT a wide-area one,
took the other LAN's peers for its own LAN and its joiners for remote (the formation
of "Probes after a loss", seeds 0-9: 48 wide-area edges beyond the fewest in the 216
trees of the nine seeds that went quiet, now 2 in all 240, and none with the rule
there). The offer stands until a round trip shows the sponsor near: on a busy machine
the first ping-pongs can take longer than a wide-area round trip, and a faster one
timed later (:class:`Remeasured`, from heartbeats) settles it.

Borrowing ends the downloads, not the replies to the probes: every member probes for the
joiner's new trees and then makes its extra probes, every joiner its own, each reply an
``Info`` with a position in every tree (``2 P`` of them). So:

(1) A member that hears ``Near`` starts the joiner's trees as copies of the sponsor's
    (``_copy_trees``): in each, the parent it has in the sponsor's tree of that kind,
    the sponsor below the joiner; the hop is the same hop (its figures stand), the
    distance and rate are bounds until the parent's position arrives. That is the
    sponsor's tree, which had its extra probes, with the joiner one LAN hop above it: no
    probe. A joiner whose sponsor measured anyone tells the members of its Welcome that
    it joined only once its probe of the sponsor returned, and then with its ``Near``
    (``Update.near``; the sponsor, which knows it, gets the ``Near`` alone), so a member
    copies the sponsor's trees as it makes the joiner's, before it would probe for them:
    on fig. 9's rejoin simulated on ``das2-spread:32,4``, 16 ``Near`` messages instead
    of 304 (one LAN probe, some milliseconds, delays the Updates).
(2) Only probing that found a parent in every new tree renews the extra probes (sec.
    IV-A's rule; a copied tree renews none), and while only a joiner's new trees lack a
    parent a probe asks for those (``InfoRequest.roots``): its ``Info`` carries two
    positions, not ``2 P``.
(3) A joiner that borrowed probes only its LAN (``_in_lan`` among the peers it
    measured): its LAN's one wide-area edge per tree is there already (Property I), and
    what it can improve is inside the LAN; but after as many probes in a row as it has
    measured peers that gave none of its trees without a parent one (a LAN that all
    joined so may have none to give), it probes those trees' roots. LAN probes take a
    fraction of a millisecond, so a joiner can run out of LAN peers before the members'
    ``Near`` (behind the broadcast on the wide-area links) has given its LAN the other
    joiners' trees, and then probes those joiners. It measures a peer it has not
    measured by pings, as a climbing child does ("Repair"): a peer it holds at a like
    RTT (within ``NOISE_SLACK``) lends its rate, and only with none does the 128 KiB
    download follow, over the wide area under the broadcast. So does a member probing a
    process that joined after it first had a parent in every tree (``_newcomers``): a
    joiner whose ``Near`` gave it no figures (it had not measured the sponsor) would
    otherwise cost it a download, for the joiner's trees and again in its extra probes.
    (Fig. 9 measured on real processes, half the processes rejoining at once: in a
    diagnostic run, the processes that had not borrowed made 39 downloads after the
    rejoin, most over the wide area under the broadcasts, and the broadcasts were back
    5.2 s after it; with this rule, back 2.2-11.4 s after it in five runs, median 4.8.)
    A joiner that borrowed knows that its smallest RTT is a LAN one, so its chain probes
    count a parent within ``NEAR_RATIO`` of it as in its LAN, not remote
    (:func:`~gridcoll.phoenix.trees.chained`, ``lan_known``): on the same simulated
    rejoin the joiners made 820 chain probes, for trees whose root was a few LAN hops
    away, and now none (1605 probes in all after the rejoin, now 805).
(4) The sponsor keeps the vnodes it hands a joiner in its reach set until the joiner
    attaches (``_lent``; the joiner's first probe is its sponsor, so it attaches below
    it in every tree at once; a timer of ``stall_s`` ends the loan otherwise): a target
    for them that reaches the sponsor meanwhile goes point-to-point to the joiner.
    Otherwise every join shrinks the sponsor's reach in all ``2 P`` trees and grows it
    back a moment later, and both changes go up to every root.
(5) A child reports a changed summary to its parent only when a figure of it moved by
    more than ``NOISE_SLACK`` (:func:`~gridcoll.phoenix.trees.summary_moved`; a changed
    reach set always goes up): a joiner below changes every ancestor's descendant count
    by one, in every tree.

Losses and the first round of probing are unchanged by these rules. A joiner outside
its sponsor's LAN borrows nothing and probes as the paper's (figures, and what was tried
and not kept: docs/phoenix.md, "The evidence behind protocol.py's rules").

*Broadcast (sec. IV-D).* The root owns the root vnode, picks the tree the model predicts
faster for the size (:func:`~gridcoll.phoenix.trees.choose_tree`: the latency tree store
and forward, the bandwidth tree pipelined) and treats the whole namespace as its target
set. A long message is pipelined ("long messages are pipelined along the spanning
trees"): the root cuts it into ``nsegments`` segments of the size the model picks from
its own bandwidth summary (:func:`~gridcoll.phoenix.trees.segment_size`; a short message
is one segment), on whichever tree carries it (the model picks the latency tree for a
long message only while the bandwidth tree is being repaired, and its store-and-forward
estimate is then an upper bound), and sends them all at once, in order; each
:class:`Bcast` carries its ``segment`` and ``nsegments`` and a target set of its own. A
process given a segment with a target set (I) delivers it to the vnodes it owns, (II)
sends each child, most descendants first, the targets the child reaches, (III) sends the
rest point-to-point to their owners by its routing table, at once, as a binomial relay:
the owners (ordered by id) are halved, the upper half's targets go to its first owner,
which applies the same rules to them, and so on, so a process sends ``log2(owners) + 1``
copies instead of one per owner (a repair's fallback otherwise makes one process send
the whole payload once per vnode of a lost subtree); a segment moves on as soon as it
arrives, so the segments of one broadcast overlap down the tree (the driver's links
serialise them). Point-to-point messages are never forwarded along a tree; tree messages
that have made more hops than there are members go point-to-point (a transient cycle).
Segments are routed independently: a tree that changes between two segments only changes
their routes.

Invariant B: for each broadcast and each segment, the target sets of the messages in
flight and the vnodes already delivered partition the namespace. Each step splits a
set and drops nothing, so every vnode gets every segment exactly once, whatever the
trees look like, as long as point-to-point messages reach the owner (the routing
invariant of :mod:`~gridcoll.phoenix.vnodes`). :class:`Deliver` is per segment; a
vnode has the broadcast once it has every segment. The segments a vnode has travel
with it (``VNodeState.partial``), so a vnode that migrates between two segments gets
the rest at its new owner, each once. A second delivery of a segment to a vnode raises
(unless a copy was sent again after a failure: "Failures").

*Reduction (sec. IV-E).* ``values`` gives the application's data per vnode. A vnode's
data is counted by the process that owns it while the reduction is known there, once:
the set of reductions a vnode contributed to travels with it, and data kept for a vnode
not owned is counted if the vnode arrives. Partial results carry the set of vnodes they
cover. A process adds its own and its children's partials until it holds its whole
subtree's (its own vnodes and every child's reach set: "each processor simply waits for
data from each of its children", sec. IV-E) or its timeout expires (its largest distance
to any root, for trees that are changing, plus the time its subtrees take to carry
``nbytes``), then sends the sum to its parent in the latency tree of the process that
owns the root vnode; later data is forwarded as it arrives. Each term and each partial
sum is ``nbytes`` on the wire. Partials reaching a process that has no parent, or after
too many hops, go point-to-point to the root vnode. The owner of the root vnode sums,
and emits :class:`ReduceDone` when the covered set is the namespace, or at its give-up
timer (``give_up_factor`` times its timeout) with the missing vnodes; data arriving
after that is dropped. If the root vnode moves, its partial sum moves with it.

Invariant R: the covered sets of the partial sums in flight or held are disjoint, so
a vnode is counted at most once; a second count raises.

References
----------
H. Saito, K. Taura, T. Chikayama, *Collective operations for wide-area message passing
systems using adaptive spanning trees* (seed 004), sec. III, IV and VI.
"""

from __future__ import annotations

import math
import random
from collections.abc import Callable, Hashable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace

from gridcoll.errors import LocalProtocolError, ProtocolError, RemoteProtocolError
from gridcoll.phoenix.events import (
    PROBE_BYTES,
    Abandoned,
    Action,
    BcastRequested,
    Deliver,
    Event,
    JoinRequested,
    LeaveRequested,
    MigrateRequested,
    PeerFailed,
    PeerLost,
    Probe,
    ProbeResult,
    Received,
    ReduceDone,
    ReduceRequested,
    Remeasured,
    Send,
    SetTimer,
    Start,
    TimerExpired,
)
from gridcoll.phoenix.messages import (
    HEADER_BYTES,
    KINDS,
    Adopt,
    AdoptItem,
    Bcast,
    ChildItem,
    ChildUpdates,
    Handover,
    Info,
    InfoRequest,
    JoinRefused,
    JoinRequest,
    LeaveAck,
    Leaving,
    Message,
    Near,
    ParentUpdates,
    Partial,
    Position,
    RootSum,
    Update,
    Want,
    Welcome,
    message_bytes,
)
from gridcoll.phoenix.nodesets import NodeSet
from gridcoll.phoenix.states import ACCEPTS as _ACCEPTS
from gridcoll.phoenix.states import TRANSITIONS, State, transition
from gridcoll.phoenix.trees import (
    NEAR_RATIO,
    NOISE_SLACK,
    Edge,
    Summary,
    bandwidth_bar,
    bandwidth_better,
    bandwidth_class,
    bandwidth_offer,
    bandwidth_summary,
    chained,
    child_order,
    choose_tree,
    latency_bar,
    latency_better,
    latency_summary,
    segment_size,
    summary_moved,
)
from gridcoll.phoenix.vnodes import VNodeTable

__all__ = [
    "HEADER_BYTES",
    "KINDS",
    "PROBE_BYTES",
    "SEGMENT_COST_S",
    "SITE_SHIFT",
    "TRANSITIONS",
    "WANTS",
    "Abandoned",
    "Action",
    "BcastRequested",
    "Deliver",
    "Event",
    "JoinRequested",
    "LeaveRequested",
    "LocalProtocolError",
    "Message",
    "MigrateRequested",
    "PeerFailed",
    "PeerLost",
    "Probe",
    "ProbeResult",
    "Process",
    "ProtocolError",
    "Received",
    "ReduceDone",
    "ReduceRequested",
    "Remeasured",
    "RemoteProtocolError",
    "Send",
    "SetTimer",
    "Start",
    "State",
    "TimerExpired",
]

SITE_SHIFT = 52
"""A process id's bits from this one up name its *site* (a cluster, a LAN; 0 if unsaid):
a dead process's heir is taken in its site while one of it lives (``_successor``), so
its vnodes, and the broadcasts sent again to them, stay off the wide area. The driver
draws ids (rule 2) with the site in these bits; the simulator's small ids are all of
site 0."""

SEGMENT_COST_S = 20e-6
"""Default fixed cost of one segment message (per-message CPU, protocol and wire
overheads; ``c`` of :func:`~gridcoll.phoenix.trees.segment_size`): a few tens of
microseconds per message, as MPI over TCP on the paper's Gigabit-era clusters."""


def _tree_update(event: Event) -> bool:
    """A tree update from a neighbour: what :meth:`Process.handle_all` runs together."""
    return type(event) is Received and isinstance(event.message, ChildUpdates | ParentUpdates)


# -- per-process bookkeeping -------------------------------------------------------------
@dataclass
class _Child:
    reach: NodeSet
    summary: Summary
    rtt: float
    bw: float


@dataclass
class _Tree:
    kind: str
    root: int
    parent: int | None = None
    rtt: float = math.inf
    bw: float = 0.0
    dist: float = math.inf
    est: float = 0.0
    path: tuple[int, ...] = ()
    children: dict[int, _Child] = field(default_factory=dict)
    sent_up: tuple[NodeSet, Summary] | None = None
    sent_down: tuple[float, float, int, tuple[int, ...]] | None = None
    estimated: bool = False  # rtt and bw to the parent are bounds from an Adopt
    old_parent: int | None = None  # to detach from once the new parent took us
    adopted: int = 0  # adoptions since the last move by probing
    former: dict[int, NodeSet] = field(default_factory=dict)  # moved-away child -> reach
    fallback: tuple[int, ...] = ()  # the Adopt's next parents, if this one leaves too

    def connected(self) -> bool:
        return self.dist < math.inf if self.kind == "latency" else self.est > 0

    def position(self, me: int) -> Position:
        return Position(self.kind, self.root, self.dist, self.est, len(self.children), self.path)

    def reached(self, child: int, reach: NodeSet) -> None:
        """``child`` reaches (or last reached) ``reach``: no other former child is
        remembered for those vnodes (module doc, "Repair")."""
        for other, had in list(self.former.items()):
            if other != child and not had.isdisjoint(reach):
                if rest := had - reach:
                    self.former[other] = rest
                else:
                    del self.former[other]

    def disconnect(self) -> None:
        self.parent, self.rtt, self.bw = None, math.inf, 0.0
        self.dist, self.est, self.path = math.inf, 0.0, ()
        self.estimated, self.adopted, self.fallback = False, 0, ()


@dataclass
class _Reduce:
    op_id: Hashable
    root: int
    op: Callable[[object, object], object]
    nbytes: int = 8
    values: dict[int, object] = field(default_factory=dict)
    value: object = None
    covered: NodeSet = field(default_factory=NodeSet)
    expired: bool = False


_DATA = (Bcast, Partial, Handover, Update)
"""Messages a dead process sent before it died that still count: data, vnodes and
where it sent vnodes."""

_ORIGINS_KEPT = 1024
"""Pipelined broadcasts whose root process is remembered (for :class:`Abandoned`)."""

WANTS = 3
"""How many times a process asks for the rest of a broadcast that stopped coming after a
failure before it abandons it (module doc, "Failures")."""


def _replace_targets(m: Bcast, targets: NodeSet, via_tree: bool) -> Bcast:
    """``m`` one hop further, for ``targets`` (the same op and segment)."""
    return replace(m, targets=targets, via_tree=via_tree, hops=m.hops + 1)


def _successor(dead: int, members: Iterable[int]) -> int | None:
    """The heir of a dead process's vnodes: the next member id after ``dead``, cyclically,
    among the members of its site (:data:`SITE_SHIFT`) if any, else among all (one rule
    every survivor applies alike; module doc, "Failures")."""
    ids = sorted(members)
    pool = [m for m in ids if m >> SITE_SHIFT == dead >> SITE_SHIFT] or ids
    return next((m for m in pool if m > dead), pool[0] if pool else None)


def _combine(op: Callable, a: object, a_cov: NodeSet, b: object, b_cov: NodeSet) -> object:
    if not a_cov:
        return b
    if not b_cov:
        return a
    return op(a, b)


class Process:
    """One process of the protocol (see the module doc).

    Args:
        pid: this process's id.
        rng: the only source of randomness (which peer to probe, which heir).
        extra_probes: probes after a parent is found in every tree (sec. IV-A: 10).
        founder_vnodes: for a founder, every founder's vnodes (pid -> vnodes, covering
            ``0 .. size - 1``); None for a process that will join.
        send_overhead_s: the per-child send overhead ``o`` counted in the latency tree.
        default_timeout_s: the reduction timeout while no distance is known.
        give_up_factor: the root vnode's owner reports missing data after this many
            timeouts.
        chain_probes: after the extra probes, at most this many more while this
            process is a LAN gateway behind another remote LAN in some latency tree
            (:func:`~gridcoll.phoenix.trees.chained`: Property I, seen locally).
        roots: keep trees only for these roots (None: for every member, the protocol
            of the paper). For a driver that wants some roots' trees only (the static
            builders of :mod:`gridcoll.algorithms.phoenix`); every process of a run
            must be given the same set. A broadcast or reduction rooted elsewhere then
            goes point-to-point.
        remote_probes: also spend the ``chain_probes`` budget while this process's
            parent in some tree (either kind) is remote, its RTT more than ``NEAR_RATIO``
            times the nearest peer's. With every member's trees a process keeps probing
            while any of them lacks a parent and makes hundreds of probes; with one
            root it makes about ``log P + extra_probes``, often all before its LAN
            neighbours are connected, and keeps a wide-area parent (Property I lost).
            Off by default (the behaviour above).
        segment_cost_s: the fixed cost of one segment message, ``c`` of the model that
            cuts long broadcasts into segments (:func:`~gridcoll.phoenix.trees.segment_size`).
        remember: measure each peer once: a later probe of it only asks for its
            Info (module doc, "Repair").
        resend_ops: how many recent broadcasts' messages are kept to send again if
            the process they went to dies (module doc, "Failures"); 0 keeps none.
        resend_bytes: at most this many payload bytes are kept so (older broadcasts
            are dropped first; the latest is always kept whole).
        stall_s: after a failure, how long a pipelined broadcast our vnodes have only
            part of may go without a new segment before we ask our parent in its tree
            for the rest (``Want``; module doc, "Failures").
    """

    def __init__(
        self,
        pid: int,
        *,
        rng: random.Random,
        extra_probes: int = 10,
        founder_vnodes: Mapping[int, Iterable[int]] | None = None,
        send_overhead_s: float = 0.0,
        default_timeout_s: float = 1.0,
        give_up_factor: float = 10.0,
        chain_probes: int = 30,
        roots: frozenset[int] | None = None,
        remote_probes: bool = False,
        segment_cost_s: float = SEGMENT_COST_S,
        remember: bool = True,
        resend_ops: int = 16,
        resend_bytes: int = 32 * 1024 * 1024,
        stall_s: float = 1.0,
    ) -> None:
        if extra_probes < 0:
            raise ValueError(f"extra_probes must be >= 0, got {extra_probes!r}")
        if not stall_s > 0:
            raise ValueError(f"stall_s must be > 0, got {stall_s!r}")
        if resend_ops < 0 or resend_bytes < 0:
            raise ValueError(
                f"resend_ops and resend_bytes must be >= 0, got {resend_ops!r}, {resend_bytes!r}"
            )
        self.pid = pid
        self.rng = rng
        self.extra_probes = extra_probes
        self.send_overhead_s = send_overhead_s
        self.default_timeout_s = default_timeout_s
        self.give_up_factor = give_up_factor
        self.chain_probes = chain_probes
        self.roots = roots
        self.remote_probes = remote_probes
        self.segment_cost_s = segment_cost_s
        self.state = State.IDLE
        self.error: str | None = None
        self.table: VNodeTable | None = None
        self.members: set[int] = {pid}
        self.departed: set[int] = set()
        self.trees: dict[tuple[str, int], _Tree] = {}
        self.probes_made = 0
        self.remember = remember
        self.measured: dict[int, ProbeResult] = {}  # peer -> its measurement
        self.stragglers = 0
        self.resend_ops, self.resend_bytes = resend_ops, resend_bytes
        self.stall_s = stall_s
        self._sent_bytes = 0
        self.failed: set[int] = set()  # members reported dead (PeerFailed)
        self.duplicates = 0  # resent segments a vnode already had (dropped)
        self.from_failed = 0  # control messages from dead members (dropped)
        self._sent: dict[Hashable, list[tuple[int, int, Bcast]]] = {}  # op -> (dst, n, m)
        self._sends_to: dict[int, int] = {}  # dst -> messages sent to it (n: the n-th)
        self._resent_ops: set[Hashable] = set()
        self._origins: dict[Hashable, tuple[str, int, int]] = {}  # pipelined op -> its
        # tree's kind, its root process, its number of segments
        self._stalls: dict[Hashable, tuple[int, int]] = {}  # op -> segments held, asks made
        self._doubts: dict[int, list[tuple[int, int, int]]] = {}  # pid -> (v, epoch, src)
        self._owed: dict[int, set[int]] = {}  # claimant not yet a member -> vnodes to correct
        self._told: dict[int, int] = {}  # dead process -> the heir we sent its entries
        self._lacking: dict[Hashable, NodeSet] = {}  # reduction -> vnodes whose owner died
        self._founders = founder_vnodes
        self._extra_left = extra_probes
        self._chain_left = chain_probes
        self._lan_rtt = math.inf
        self._borrow: tuple[int, float, tuple] | None = None  # sponsor, its lan_rtt, measured
        self._unannounced: set[int] | None = None  # members to tell we joined ("Joins")
        self._lan_bw = 0.0  # the fastest rate measured: the LAN's (trees.bandwidth_offer)
        self._probing: int | None = None
        self._probe_result: ProbeResult | None = None
        self._probe_info: Info | None = None
        self._pinging = False  # the probe under way is pings only (a climbed-to ancestor)
        self._reduces: dict[Hashable, _Reduce] = {}
        self._sums: dict[Hashable, RootSum] = {}
        self._awaiting: set[int] = set()
        self._acked: set[int] = set()
        self._out: list[Action] = []
        self._up: set[tuple[str, int]] = set()
        self._down: set[tuple[str, int]] = set()
        self._new_children: dict[tuple[str, int], set[int]] = {}
        self._child_batch: dict[int, list[ChildItem]] = {}
        self._early: list[tuple[int, Message]] = []
        self._round = 0
        self._former: dict[tuple[str, int], AdoptItem] = {}  # our parents when we left
        self._sponsor: int | None = None  # a joiner's first probe: the member it joined by
        self._gave: set[int] = set()  # the vnodes we handed over while leaving
        self._misses = 0  # probes of measured peers that left a tree without a parent
        self._unmeasured: set[int] = set()  # parents taken on bounds (climb): probe next
        self._recheck: set[int] = set()  # measured faster since (Remeasured): probe again
        self._revisit = False  # after a loss or a join, probe only peers already measured
        self._explored = 0  # random probes among every member (before revisiting)
        self._focus: set[int] | None = None  # roots the probes ask about (None: all)
        self._swept: dict[int, set[int]] = {}  # root: peers asked about it since a loss
        self._moved: set[int] = set()  # roots whose trees moved since a loss
        self._settled = False  # has had a parent in every tree
        self._joined: set[int] = set()  # members that joined since: their trees are new
        self._newcomers: set[int] = set()  # members that joined since we first settled
        self._lan_only = False  # a joiner near its sponsor: probe its LAN ("Joins")
        self._lan_misses = 0  # its probes in a row that gave no orphan tree a parent
        self._contact: int | None = None  # the member a JOINING process asked
        self._lent: dict[int, NodeSet] = {}  # joiner -> vnodes handed to it, in our reach
        self._sponsored: set[int] = set()  # joiners we welcomed ("Membership")
        self._lent_nothing: set[int] = set()  # welcomed with nothing measured: probe ("Joins")

    # -- the API ----------------------------------------------------------------------
    def handle(self, event: Event) -> list[Action]:
        """Feed one event; return the actions it causes, in order.

        Raises:
            LocalProtocolError: if the process is in ERROR, or the event is not one its
                state takes (the process then goes to ERROR).
        """
        return self.handle_all((event,))

    def handle_all(self, events: Sequence[Event]) -> list[Action]:
        """Feed events in order; return the actions they cause, in order (rule 5).

        The same as :meth:`handle` on each in turn, but that the tree updates a run of
        ChildUpdates and ParentUpdates in a row causes go out once, after the run: per
        tree, the latest reach set, summary and position, which supersede the ones an
        update per event would have sent in between. Each event's other actions, and
        every event that is not such an update, keep their order (the updates before
        it are sent first). On fig. 9's rejoin simulated on ``das2-spread:32,4``, 16
        processes joining at once set off some 9,000 such updates in a second; measured
        on 2 shared cores, a process with a backlog of them sends one per neighbour
        instead of one per update it took in (ChildUpdates sent in the 3 s after the
        rejoin: 3924 one by one, 1843 together).

        Raises:
            LocalProtocolError: as :meth:`handle`; the actions of the events before the
                failing one are lost with it (the process is in ERROR).
        """
        if self.state is State.ERROR:
            raise LocalProtocolError(f"process {self.pid} is in ERROR: {self.error}")
        self._out = []
        try:
            for i, event in enumerate(events):
                if not isinstance(event, _ACCEPTS[self.state]):
                    raise LocalProtocolError(
                        f"process {self.pid} in state {self.state.name} cannot take {event!r}"
                    )
                self._dispatch(event)
                run_goes_on = i + 1 < len(events) and _tree_update(events[i + 1])
                if not (run_goes_on and _tree_update(event)):
                    self._flush()
        except Exception as err:
            self.state = transition(self.state, Exception)
            self.error = f"{type(err).__name__}: {err}"
            raise
        return self._out

    @property
    def owned(self) -> frozenset[int]:
        """The vnodes mapped to this process."""
        return frozenset(self.table.owned) if self.table else frozenset()

    def parent(self, kind: str, root: int) -> int | None:
        """This process's parent in ``root``'s tree of ``kind`` (None at the root)."""
        tree = self.trees.get((kind, root))
        return tree.parent if tree else None

    def probing(self) -> bool:
        """True while this process still has probes to make."""
        return self._probing is not None or self._wants_probe()

    # -- dispatch ---------------------------------------------------------------------
    def _dispatch(self, event: Event) -> None:
        if isinstance(event, Received):
            if event.src in self.failed and not isinstance(event.message, _DATA):
                self.from_failed += 1  # sent before it died; its place is settled
            elif self.state is State.LEFT:
                self._straggler(event.src, event.message)
            else:
                self._receive(event.src, event.message)
        elif isinstance(event, ProbeResult):
            self._on_probe_result(event)
        elif isinstance(event, TimerExpired):
            self._on_timer(event.timer)
        elif isinstance(event, Start):
            self._on_start()
        elif isinstance(event, JoinRequested):
            self.state = transition(self.state, JoinRequested)
            self._contact = event.contact
            self._send(event.contact, JoinRequest())
        elif isinstance(event, LeaveRequested):
            self._on_leave(event.heir)
        elif isinstance(event, MigrateRequested):
            self._on_migrate(event)
        elif isinstance(event, BcastRequested):
            self._on_bcast_requested(event)
        elif isinstance(event, ReduceRequested):
            self._on_reduce_requested(event)
        elif isinstance(event, PeerFailed):
            self._on_peer_failed(event.pid, event.received, event.delivered)
        elif isinstance(event, Remeasured):
            self._on_remeasured(event.peer, event.rtt_s, event.bw_Bps)

    def _receive(self, src: int, m: Message) -> None:
        if self.state is State.JOINING and isinstance(m, JoinRefused):
            if not m.members:
                raise RemoteProtocolError(f"contact {src} has left and knows no member")
            self._contact = self.rng.choice(sorted(m.members))
            self._send(self._contact, JoinRequest())
            return
        if self.state is State.JOINING and not isinstance(m, Welcome):
            self._early.append((src, m))  # gossip may overtake the Welcome
            return
        handler = {
            InfoRequest: self._on_info_request,
            Info: self._on_info,
            ChildUpdates: self._on_child_updates,
            ParentUpdates: self._on_parent_updates,
            Adopt: self._on_adopt,
            Bcast: self._on_bcast,
            Want: self._on_want,
            Partial: self._on_partial,
            JoinRequest: self._on_join_request,
            Welcome: self._on_welcome,
            Handover: self._on_handover,
            Update: self._on_update,
            Leaving: self._on_leaving,
            LeaveAck: self._on_leave_ack,
            Near: self._on_near,
        }.get(type(m))
        if handler is None:
            raise RemoteProtocolError(f"unknown message {m!r} from {src}")
        handler(src, m)

    def _straggler(self, src: int, m: Message) -> None:
        """A message reaching a LEFT process (module doc, "Stragglers"): forward data
        along our pointers, answer what a sender waits for, drop the rest."""
        self.stragglers += 1
        if isinstance(m, Bcast | Partial | Handover):
            self._receive(src, m)
        elif isinstance(m, Leaving):
            self._learn_routes(m.entries)
            self._ack_leaving(src, m.round)
        elif isinstance(m, InfoRequest):
            self._on_info_request(src, m)
        elif isinstance(m, ChildUpdates):
            self._redirect(src, m)
        elif isinstance(m, JoinRequest):  # members it knew left later: no cycle
            self._send(src, JoinRefused(frozenset(self.members - {self.pid})))

    def _send(self, dst: int, m: Message) -> None:
        if dst == self.pid:
            raise LocalProtocolError(f"process {self.pid} sending {m!r} to itself")
        self._out.append(Send(dst, m, message_bytes(m)))
        self._sends_to[dst] = self._sends_to.get(dst, 0) + 1

    def _others(self) -> list[int]:
        return sorted(self.members - {self.pid})

    # -- membership -------------------------------------------------------------------
    def _on_start(self) -> None:
        if self._founders is None:
            raise LocalProtocolError(f"process {self.pid} is not a founder; feed JoinRequested")
        if self.pid not in self._founders:
            raise LocalProtocolError(f"founder mapping does not name process {self.pid}")
        self.table = VNodeTable.founded(self.pid, self._founders)
        self.state = transition(self.state, Start)
        for pid in self._founders:
            self._add_member(pid)

    def _keeps(self, root: int) -> bool:
        """True if this process keeps ``root``'s trees (the ``roots`` option)."""
        return self.roots is None or root in self.roots

    def _add_member(self, pid: int) -> bool:
        known = (KINDS[0], pid) in self.trees or not self._keeps(pid)
        if pid in self.departed or (pid in self.members and known):
            return False
        self.members.add(pid)
        for kind in KINDS if self._keeps(pid) else ():
            tree = _Tree(kind, pid)
            if pid == self.pid:
                tree.dist, tree.est = 0.0, math.inf
            self.trees[kind, pid] = tree
        if self._settled and pid != self.pid:
            self._joined.add(pid)
            self._newcomers.add(pid)
        self._revisit = bool(self.measured)  # measured peers only (module doc, "Joins")
        if owed := self._owed.pop(pid, None):
            self._correct(pid, owed)
        return True

    def _learn_members(self, src: int, members: frozenset[int]) -> None:
        """Add ``members``; tell each new one (but ``src``) that we are one, and each
        joiner we welcomed of them all (module doc, "Membership")."""
        new = [m for m in sorted(members - self.members) if self._add_member(m)]
        for joiner in sorted(self._sponsored & self.members - {src}):
            if told := frozenset(new) - {joiner}:
                self._send(joiner, Update(told))
        if self.state is State.LEAVING:
            for m in new:
                self._ask_to_ack(m)
            return
        owned = self.table.owned if self.table else {}
        # our recovered vnodes: a new member may have taken them over too ("Failures")
        claims = tuple((v, self.pid, s.epoch) for v, s in sorted(owned.items()) if s.recovered)
        for m in new:
            if m == src and not claims:
                continue
            if self._unannounced is not None and not claims:
                self._unannounced.add(m)
            else:
                self._send(m, Update(frozenset({self.pid}), claims))

    def _announce(self, near: Near | None = None) -> None:
        """Tell the members a joiner held back that it joined (with ``near``, that it is
        near its sponsor: module doc, "Joins")."""
        held, self._unannounced = self._unannounced or set(), None
        for q in sorted(held & self.members - {self.pid}):
            self._send(q, Update(frozenset({self.pid}), near=near))

    def _on_join_request(self, src: int, m: JoinRequest) -> None:
        if src in self.departed:
            raise RemoteProtocolError(f"departed process {src} asked to join (ids are not reused)")
        table = self._table()
        self._add_member(src)
        route = tuple((v, *table.route[v]) for v in range(table.size))
        measured = tuple((q, r.rtt_s, r.bw_Bps) for q, r in sorted(self.measured.items()))
        welcome = Welcome(table.size, frozenset(self.members), route, measured, self._lan_rtt)
        self._send(src, welcome)
        if not measured:  # it sends no Near: we measure it ourselves, first ("Joins")
            self._lent_nothing.add(src)
        mine = sorted(table.owned)
        give = mine[len(mine) - len(mine) // 2 :] if self.state is State.ACTIVE else []
        self._hand_over(give, src)
        if give:  # in our reach until the joiner attaches below us ("Joins")
            self._lent[src] = NodeSet.of(give)
            self._out.append(SetTimer(("lent", src), self.stall_s))
        if self.state is State.LEAVING:
            self._ask_to_ack(src)
        self._sponsored.add(src)  # we introduce it to the members we learn of later

    def _on_welcome(self, src: int, m: Welcome) -> None:
        if self.state is not State.JOINING:
            raise RemoteProtocolError(f"Welcome from {src} in state {self.state.name}")
        self.table = VNodeTable(self.pid, m.size)
        for v, pid, epoch in m.route:
            self.table.route[v] = (pid, epoch)
        self.state = transition(self.state, Welcome)
        self._sponsor = src  # first probe: a parent in every tree at once
        if m.measured:  # if the sponsor is in our LAN; one that measured nothing can't say
            self._borrow = (src, m.lan_rtt, m.measured)
            self._unannounced = set()  # told once the first probe says if we are near it
        self._add_member(self.pid)
        self._learn_members(src, m.members)
        early, self._early = self._early, []
        for s, message in early:
            self._receive(s, message)
        self._claim_orphans()

    def _on_update(self, src: int, m: Update) -> None:
        self._learn_routes(m.entries, claimant=src)
        self._learn_members(src, m.members)
        if m.near is not None:  # a joiner near its sponsor: before we probe for its trees
            self._on_near(src, m.near)

    def _learn_routes(
        self, entries: Iterable[tuple[int, int, int]], claimant: int | None = None
    ) -> None:
        """Take newer routing entries. An owned vnode goes to a newer or winning
        failover claim (:meth:`VNodeTable.learn`); a ``claimant`` claiming for itself
        a vnode we hold at a newer or winning epoch is told so (module doc, "Failures")."""
        table = self._table()
        corrections, dead = [], set()
        for v, pid, epoch in entries:
            ours = table.route.get(v, (None, -1))
            if ours[0] == claimant != pid and ours[1] > epoch and pid not in self.failed:
                self._doubts.setdefault(pid, []).append((v, epoch, claimant))  # see below
            elif ours[0] == claimant != pid and ours[1] > epoch:
                # our owner of v says it had v at dead ``pid``: the handover of v from
                # ``pid`` to it died with ``pid``, so v fails over from ``pid``
                table.learn(v, pid, ours[1] + 1)
                dead.add(pid)
            elif pid in self.failed and (table.learn(v, pid, epoch) or self._heir(pid) == self.pid):
                dead.add(pid)  # v fails over from it: passed on if news to us, or ours
            if (
                pid == self.pid
                and ours[0] in self.failed
                and epoch > ours[1]
                and v not in table.owned
            ):
                # said to be ours: the handover to us died with its sender
                if self.state is State.ACTIVE:
                    table.take_over([v], after=epoch)
                    self._claim([v])
                    self._mark_all_up()
                continue
            if pid in self.departed:
                continue
            owned = v in table.owned
            if table.learn(v, pid, epoch, claimed=pid == claimant):
                if owned:
                    self._mark_all_up()
            elif owned and pid == claimant:
                corrections.append(v)
        if claimant in self.members:
            self._correct(claimant, corrections)
        elif corrections and claimant is not None and claimant not in self.departed:
            self._owed.setdefault(claimant, set()).update(corrections)  # when we know it
        for pid in sorted(dead):
            self._fail_over(pid)

    def _correct(self, claimant: int, vnodes: Iterable[int]) -> None:
        """Tell ``claimant``, which claimed these vnodes, that we own them at a newer or
        winning epoch (one that claimed before we knew it is a member is told once we
        do: else it keeps them too, module doc, "Failures")."""
        table = self._table()
        if entries := tuple(
            (v, self.pid, table.owned[v].epoch) for v in sorted(vnodes) if v in table.owned
        ):
            self._send(claimant, Update(frozenset(), entries))

    def _on_leave(self, heir: int | None) -> None:
        others = [p for p in self._others()]
        if not others:
            raise LocalProtocolError(f"process {self.pid} is the last member and cannot leave")
        if heir is None:
            heir = self.rng.choice(others)
        elif heir not in others:
            raise LocalProtocolError(f"heir {heir!r} is not another member")
        if self._unannounced is not None:  # a member must know of us to take our Leaving
            self._announce()
        self.state = transition(self.state, LeaveRequested)
        self._hand_over(sorted(self._table().owned), heir)
        for r in list(self._reduces.values()):
            self._flush_reduce(r, force_p2p=True)
        adopt: dict[int, list[AdoptItem]] = {}
        for key, tree in self.trees.items():
            self._detach_old(tree)
            if tree.parent is not None:
                self._batch_child(tree.parent, ChildItem(key[0], key[1], attach=False))
                self._former[key] = AdoptItem(*key, tree.parent, tree.rtt, tree.bw)
                for c, item in self._adoptions(tree).items():
                    adopt.setdefault(c, []).append(item)
        for c, items in sorted(adopt.items()):  # before Leaving: FIFO, so it acts first
            self._send(c, Adopt(tuple(items)))
        for p in others:
            self._ask_to_ack(p)

    def _adoptions(self, tree: _Tree) -> dict[int, AdoptItem]:
        """Where a leaver's children go (module doc, "Repair"): the nearest one (the
        smallest RTT to us, then the most descendants) takes our place below our
        parent, the others move below it, so our subtree stays one subtree (a LAN
        reached through us keeps one wide-area edge, Property I)."""
        kids = tree.children
        if not kids:
            return {}
        order = sorted(kids, key=lambda c: (kids[c].rtt, -kids[c].summary.descendants, c))
        first, key = order[0], (tree.kind, tree.root)
        up = self._former[key]
        out = {first: up}
        for i, c in enumerate(order[1:], 1):  # if the nearer ones leave too: the next
            fallback = (*order[1:i], up.parent)
            out[c] = AdoptItem(*key, first, kids[first].rtt, kids[first].bw, fallback)
        return out

    def _ask_to_ack(self, pid: int, again: bool = False) -> None:
        if (not again and (pid in self._acked or pid in self._awaiting)) or pid == self.pid:
            return
        self._awaiting.add(pid)
        table = self._table()
        entries = tuple((v, *table.route[v]) for v in sorted(self._gave))
        self._send(pid, Leaving(entries, self._round))

    def _on_leaving(self, src: int, m: Leaving) -> None:
        self._learn_routes(m.entries)
        self._remove_member(src)
        self._ack_leaving(src, m.round)
        self._claim_orphans()  # the leaver may have been a dead process's heir

    def _ack_leaving(self, leaver: int, round_: int) -> None:
        """Ack a Leaving with the members the leaver may not know: not the founders,
        if it was founded with us (fig. 9's leave on ``das2-spread:160,4``: 0.3-0.4 MB
        of member lists per wide-area link in the 10 s after it otherwise)."""
        known = self._founders.keys() if self._founders and leaver in self._founders else set()
        self._send(leaver, LeaveAck(frozenset(self.members - known), round_))

    def _on_leave_ack(self, src: int, m: LeaveAck) -> None:
        if self.state is not State.LEAVING:
            raise RemoteProtocolError(f"LeaveAck from {src} in state {self.state.name}")
        if m.round != self._round:
            return  # an ack of an earlier round; the current one is still to come
        self._awaiting.discard(src)
        self._acked.add(src)
        self._learn_members(src, m.members)  # asks the new ones; our joiners hear of them
        self._maybe_left(LeaveAck)

    def _maybe_left(self, trigger: type[LeaveAck | PeerFailed]) -> None:
        """LEAVING -> LEFT once every member we know of acked the current round (or
        died)."""
        if self.state is State.LEAVING and not self._awaiting:
            self.state = transition(self.state, trigger)

    def _remove_member(self, pid: int, crashed: bool = False) -> None:
        """``pid`` left (or, ``crashed``, died: then it forwards nothing any more, so it
        is no former child, and a leaver drops it from the children it kept)."""
        self.departed.add(pid)
        self._newcomers.discard(pid)
        self.members.discard(pid)
        self._sponsored.discard(pid)
        self._recheck.discard(pid)
        self._end_loan(pid)
        if self._probing == pid:
            self._probing, self._probe_result, self._probe_info = None, None, None
        for kind in KINDS:
            self.trees.pop((kind, pid), None)
        for key, tree in self.trees.items():
            if tree.old_parent == pid and crashed:
                tree.old_parent = None
            if tree.parent == pid:
                self._detach_old(tree)
                self._climb(key, tree)
                self._down.add(key)
                self._renew_after_loss(key[1], chain=True)
            if crashed:
                tree.former.pop(pid, None)
            keep = self.state is not State.ACTIVE and not crashed
            old = tree.children.pop(pid, None) if not keep else None
            if old is not None:  # (a leaver keeps the children it had: module doc)
                if not crashed:
                    tree.former[pid] = old.reach  # it forwards along its own old children
                    tree.reached(pid, old.reach)
                self._up.add(key)
                self._down.add(key)

    def _climb(self, key: tuple[str, int], tree: _Tree) -> None:
        """Our parent is gone and no Adopt moved us on (module doc, "Repair"): attach
        at once to the next parent the Adopt that brought us there named
        (``fallback``: a nearer sibling, so a LAN stays one subtree), else to the
        nearest ancestor on our path still a member, so the subtree stays connected;
        disconnect (and probe) only if none is. The hop is measured if we ever probed
        that process; to a sibling nearer the leaver than we are the old hop's figures
        stand as bounds, as an Adopt's; to an ancestor or the leaver's parent (the last
        fallback, often across the wide area) the route we had from it (our distance,
        our rate) stands as bounds (``estimated``) until it is probed, which it is
        next."""
        ancestors = tree.path[-2::-1]  # the grandparent first
        options = (*tree.fallback, *ancestors) if self.state is State.ACTIVE else ()
        j = next((j for j, q in enumerate(options) if q in self.members and q != self.pid), None)
        if j is None:
            tree.disconnect()
            return
        parent = options[j]
        fallback = j < len(tree.fallback)
        sibling = j < len(tree.fallback) - 1  # the last fallback is the leaver's parent
        if fallback and parent in tree.path[:-1]:  # the leaver's parent, on our route
            tree.path, tree.fallback = tree.path[: tree.path.index(parent) + 1], ()
        elif fallback:
            tree.path, tree.fallback = (*tree.path[:-1], parent), tree.fallback[j + 1 :]
        else:
            depth = len(tree.path) - 2 - (j - len(tree.fallback))
            tree.path, tree.fallback = tree.path[: depth + 1], ()
        tree.parent = parent
        known = self.measured.get(parent)
        if known is not None:
            tree.rtt, tree.bw, tree.estimated = known.rtt_s, known.bw_Bps, False
        else:
            tree.estimated = True
            if not sibling:  # a sibling is nearer the leaver: our hop to it bounds it
                # an ancestor (or the leaver's parent, our ancestor through the leaver):
                # the route we had from it stands for the hop, as an Adopt's
                if math.isfinite(tree.dist):  # our distance: at least the route's RTT
                    tree.rtt = max(tree.rtt, tree.dist)
                if tree.est > 0:  # our rate: at most the route's narrowest hop
                    tree.bw = min(tree.bw, tree.est)
                self._unmeasured.add(parent)
        tree.adopted += 1
        tree.sent_up = None  # the new parent must hear from us
        self._up.add(key)

    def _on_peer_failed(self, dead: int, received: int | None, delivered: int | None) -> None:
        """``dead`` died (module doc, "Failures"): drop it, re-map its vnodes to the
        heir, send again what we sent it after the ``received`` it passed on (for its
        own vnodes, after the ``delivered`` it took in), report what cannot complete."""
        if dead == self.pid:
            raise LocalProtocolError(f"process {self.pid} was told that it died")
        if dead in self.failed:
            return
        if self.state is State.JOINING and dead == self._contact:
            raise RemoteProtocolError(f"contact {dead} died before welcoming us: join again")
        self.failed.add(dead)
        self._owed.pop(dead, None)
        self._remove_member(dead, crashed=True)
        self.measured.pop(dead, None)
        self._awaiting.discard(dead)
        self._maybe_left(PeerFailed)
        if self.table is None:
            return  # joining: nothing is mapped here yet
        table = self.table
        heir, moved = self._fail_over(dead)
        for v, epoch, src in self._doubts.pop(dead, ()):  # told before we knew it died
            self._learn_routes([(v, dead, epoch)], claimant=src)
        self._claim_orphans()
        after = -1 if received is None else received
        took = after if delivered is None else max(after, delivered)
        own = NodeSet.of(moved)  # they go to the heir, who needs a whole broadcast
        resend = []
        for sends in self._sent.values():
            to_dead = [(n, m) for dst, n, m in sends if dst == dead]
            whole = any(n > took for n, _ in to_dead)  # else it had every segment
            for n, m in to_dead:
                targets = (m.targets if n > after else NodeSet()) - own  # its subtree
                if whole:
                    targets = targets | (m.targets & own)  # its own vnodes, at the heir
                if targets:
                    resend.append(replace(m, targets=targets))
        for m in resend:  # through the owners now: the dead's subtree is being repaired
            self._spread(replace(m, via_tree=False, resent=True))
        for op_id in [op for op, (_, root, _) in self._origins.items() if root == dead]:
            del self._origins[op_id]
            if stuck := table.abandon(op_id):
                self._out.append(Abandoned(op_id, frozenset(stuck)))
        for op_id in self._origins:  # broadcasts under way: they may stop coming
            self._watch(op_id)
        for s in list(self._sums.values()):  # the dead's data will not come
            if not s.done and s.root in table.owned:
                self._lacking[s.op_id] = self._lacking.get(s.op_id, NodeSet()) | NodeSet.of(moved)
                self._finish(s)
        for r in list(self._reduces.values()):  # nor will a dead child's
            if r.covered and not r.expired and self.state is State.ACTIVE:
                self._flush_if_complete(r)
        self._out.append(PeerLost(dead, heir, frozenset(moved), frozenset(m.op_id for m in resend)))

    def _fail_over(self, dead: int, heir: int | None = None) -> tuple[int | None, list[int]]:
        """Map the vnodes our table gives dead ``dead`` to its heir (module doc,
        "Failures"). The heir claims them to every member (settling stale pointers and
        disagreeing heirs); anyone else tells the heir where it had them, since the
        heir's own table may not give them to ``dead``. ``heir``: who takes them (None:
        :meth:`_heir`; this process after a routing cycle, :meth:`_route`). The heir and
        the vnodes."""
        table = self._table()
        heir = self._heir(dead) if heir is None else heir
        moved = table.routed_to(dead)
        if heir is None or not moved:
            return heir, moved
        if heir == self.pid:
            under_way = {
                op for s in table.owned.values() for op in s.partial if op in self._origins
            }
            table.take_over(moved, under_way=under_way)
            for op_id in under_way:  # it may have had them whole: none resends them
                self._watch(op_id)
            self._claim(moved)
            self._mark_all_up()
            for r in list(self._reduces.values()):  # a root sum lost with it starts anew
                if r.root in moved and r.op_id not in self._sums:
                    self._merge_root(r.op_id, r.root, r.op, None, NodeSet(), r.nbytes)
                self._contribute(r)
        else:
            had = tuple((v, dead, table.route[v][1]) for v in moved)
            self._send(heir, Update(frozenset(), had))
            self._told[dead] = heir
        return heir, moved

    def _claim(self, vnodes: list[int]) -> None:
        """Tell every member we own these recovered vnodes: two processes that both took
        one over learn of each other, and the epochs settle it (module doc, "Failures")."""
        table = self._table()
        if claims := tuple((v, self.pid, table.owned[v].epoch) for v in vnodes):
            for other in self._others():
                self._send(other, Update(frozenset(), claims))

    def _claim_orphans(self) -> None:
        """After a membership change, take over the vnodes of dead processes whose heir
        we have become, or tell their new heir (the one before left or died)."""
        for dead in sorted(self.failed):
            heir = self._heir(dead)
            if heir != self.pid and heir == self._told.get(dead):
                continue  # told already
            if self._table().routed_to(dead):
                self._fail_over(dead)

    def _heir(self, dead: int) -> int | None:
        """Who takes over a dead process's vnodes, as far as we know: the next member id
        after it, in its site if any is left (an active member: a leaver does not take
        vnodes)."""
        return _successor(
            dead, self.members if self.state is State.ACTIVE else self.members - {self.pid}
        )

    def _route(self, v: int, hops: int = 0) -> int:
        """Where a message for vnode ``v`` goes: its owner by our table, or, for a dead
        owner, its heir; if that is us, we take the dead owner's vnodes over first. So
        do we if the message has made more than ``2 P + 2`` hops: it is going round a
        cycle of tables that disagree about a dead owner, which only a failure causes
        (the routing invariant of :mod:`~gridcoll.phoenix.vnodes` holds otherwise)."""
        owner = self._table().owner(v)
        if owner not in self.failed:
            return owner
        heir = self._heir(owner)
        if hops > 2 * len(self.members) + 2 and self.state is State.ACTIVE:
            heir = self.pid
        if heir == self.pid:
            self._fail_over(owner, heir)
        return owner if heir is None else heir

    # -- vnodes -------------------------------------------------------------------------
    def _table(self) -> VNodeTable:
        if self.table is None:
            raise LocalProtocolError(f"process {self.pid} has no vnode table yet")
        return self.table

    def _hand_over(self, vnodes: list[int], to: int) -> None:
        if not vnodes:
            return
        table = self._table()
        states = table.give(vnodes, to)
        if self.state is State.LEAVING:
            self._gave.update(states)
        sums = tuple(self._sums.pop(op) for op, s in list(self._sums.items()) if s.root in states)
        values = tuple(
            (r.op_id, r.root, r.op, v, r.values[v], r.nbytes)
            for r in self._reduces.values()
            for v in states
            if v in r.values and r.op_id not in states[v].contributed
        )
        self._send(to, Handover(tuple(states.items()), sums, self.state is State.LEAVING, values))
        entries = tuple((v, to, s.epoch) for v, s in states.items())
        if self.state is State.LEAVING and self._awaiting | self._acked:
            # Members that acked our Leaving may point at us for these vnodes: they must
            # learn the new owner before we may leave, so ask every member again.
            self._acked.clear()
            self._awaiting.clear()  # departed ones will not hear this round
            self._round += 1
            for other in self._others():
                self._ask_to_ack(other, again=True)
        else:
            for other in self._others():
                if other != to:
                    self._send(other, Update(frozenset(), entries))
        self._mark_all_up()

    def _on_migrate(self, event: MigrateRequested) -> None:
        if event.dst == self.pid:
            return
        if event.dst not in self.members:
            raise LocalProtocolError(f"cannot migrate to {event.dst!r}: not a member")
        give = sorted(set(event.vnodes) & set(self._table().owned))
        self._hand_over(give, event.dst)

    def _on_handover(self, src: int, m: Handover) -> None:
        table = self._table()
        states = dict(m.states)
        contested = [  # someone may have taken it over: settle it (module doc, "Failures")
            v
            for v, st in states.items()
            if (self.failed and table.route.get(v, (src, 0))[0] not in (src, self.pid))
            or table.route.get(v, (src, -1))[1] >= st.epoch
        ]
        table.take(states)
        for op_id, root, op, v, value, nbytes in m.values:
            self._reduce_state(op_id, root, op, nbytes).values.setdefault(v, value)
        if self.state is not State.ACTIVE:  # leaving: pass them on at once
            heirs = [p for p in self._others() if not (m.from_leaving and p == src)]
            if not heirs:
                raise LocalProtocolError(f"process {self.pid} is leaving and has no heir")
            for s in m.sums:
                self._sums[s.op_id] = s
            self._hand_over(sorted(states), self.rng.choice(heirs))
            return
        self._claim([v for v in sorted(states) if table.owned[v].recovered or v in contested])
        for s in m.sums:
            self._merge_root(s.op_id, s.root, s.op, s.value, s.covered, s.nbytes, done=s.done)
            for v, x in s.aside:
                self._merge_root(
                    s.op_id, s.root, s.op, x, NodeSet.of([v]), s.nbytes, recovered=True
                )
        for r in self._reduces.values():
            if r.root in states and r.covered:  # our partial sum joins the root's
                value, covered, r.value, r.covered = r.value, r.covered, None, NodeSet()
                self._merge_root(r.op_id, r.root, r.op, value, covered, r.nbytes)
            self._contribute(r)
        self._mark_all_up()

    def _mark_all_up(self) -> None:
        self._up.update(self.trees)

    # -- probing and trees (sec. IV-A to IV-C) ----------------------------------------------
    def _wants_probe(self) -> bool:
        if self.state is not State.ACTIVE or len(self.members) < 2:
            return False
        if self._extra_left > 0 or self._recheck or self._unmeasured:
            return True
        if not self._complete():
            return True
        if self._sweep():
            return True
        if self._chain_left <= 0:
            return False
        return bool(self._chain_roots())

    def _chain_roots(self) -> set[int]:
        """The roots of the trees the chain probes are for: latency trees where we are a
        LAN's gateway behind another remote LAN (:func:`~gridcoll.phoenix.trees.chained`)
        and, with the ``remote_probes`` option, trees (either kind) whose parent is
        clearly further than the nearest peer measured (a LAN member hanging on a
        wide-area edge)."""
        return {
            r
            for (kind, r), t in self.trees.items()
            if (
                kind == "latency"
                and chained(
                    rtt_parent=t.rtt, dist=t.dist, lan_rtt=self._lan_rtt, lan_known=self._lan_only
                )
            )
            or (self.remote_probes and not self._in_lan(t.rtt) and t.rtt < math.inf)
        }

    def _maybe_probe(self) -> None:
        if self._probing is not None or not self._wants_probe():
            return
        peer, self._sponsor = self._sponsor, None
        ping = False
        if peer is None and self._unmeasured:  # a parent known only by bounds: measure it
            peer, ping = self._unmeasured.pop(), bool(self.measured)
        self._lent_nothing &= self.members - self.measured.keys()
        if peer is None and self._lent_nothing:  # a joiner we lent nothing: our LAN?
            peer = min(self._lent_nothing)
            self._lent_nothing.discard(peer)
        recheck = peer is None and bool(self._recheck)
        if recheck:  # measured faster than we held: judge every tree again
            peer = self._recheck.pop()
        hung: set[int] = set()
        if peer not in self.members or peer == self.pid:
            sweep = self._sweep()
            peer = self.rng.choice(sorted(sweep) or self._probe_candidates())
            # a joiner that borrowed, or a member probing a process that joined since it
            # settled, measures a new peer by pings if it can ("Joins" (3))
            ping = (
                (self._lan_only or peer in self._newcomers)
                and peer not in self.measured
                and bool(self.measured)
            )
            if sweep:
                hung = sweep[peer]
                for root in hung:
                    self._swept.setdefault(root, set()).add(peer)
        self._probing, self._probe_result, self._probe_info = peer, None, None
        self.probes_made += 1
        self._probe_result = self.measured.get(peer) if self.remember else None
        self._pinging = ping and self._probe_result is None
        if self._probe_result is None:
            self._out.append(Probe(peer, 0 if self._pinging else PROBE_BYTES))
        roots = tuple(sorted(hung or self._wanted(peer, recheck)))
        self._send(peer, InfoRequest(roots, self._bars(peer, roots)))

    def _bars(self, peer: int, roots: tuple[int, ...]) -> tuple[tuple[int, float, float], ...]:
        """``InfoRequest.bars`` for a probe of ``peer``: in each tree asked about that has
        a parent other than ``peer`` (whose position replaces bounds, :meth:`_judge`), the
        worst position the rules could take; for a peer already measured (the probe
        judges with those figures), the worst they could take through that link."""
        link = self.measured.get(peer) if self.remember else None
        rtt, bw_pq = (0.0, None) if link is None else (link.rtt_s, link.bw_Bps)
        bars = []
        for root in roots or sorted({r for _, r in self.trees}):
            lat, bw = self.trees.get(("latency", root)), self.trees.get(("bandwidth", root))
            dist, est = math.inf, -math.inf
            if lat is not None and lat.parent not in (None, peer):
                dist = latency_bar(
                    dist=lat.dist, rtt_parent=lat.rtt, lan_rtt=self._lan_rtt, rtt_cand=rtt
                )
            if bw is not None and bw.parent not in (None, peer):
                est = bandwidth_bar(bw.est, bw_pq, bw.bw)
            if dist < math.inf or est > -math.inf:
                bars.append((root, dist, est))
        return tuple(bars)

    def _sweep(self) -> dict[int, set[int]]:
        """After a loss, the measured peers that could be a better parent in a repaired
        tree we now hang on a remote parent by (a climb, an Adopt or a move across the
        wide area), each with the roots of those trees it was not asked about since
        (``_swept``; a tree that moves starts afresh): the LAN peers, while extra probes
        are left or about trees that moved since the loss (``_moved``); if there are
        none, the remote peers whose measured rate alone beats such a bandwidth tree's
        rate by the hysteresis (an offer is at most that rate,
        :func:`~gridcoll.phoenix.trees.bandwidth_offer`) (module doc, "Probes after a
        loss"). The same sweep ends a round of probes that asked about every tree
        (settling, or a join's), about the trees it left on a remote parent. Empty while
        the probes ask about every tree."""
        if not self._focus:
            return {}
        hung = {
            (kind, r): t
            for (kind, r), t in self.trees.items()
            if r in self._focus and t.parent is not None and not self._in_lan(t.rtt)
        }
        if not hung:
            return {}
        peers = {p: m for p, m in self.measured.items() if p in self.members and p != self.pid}
        roots = {r for _, r in hung}
        if self._extra_left <= 0:  # the LAN again only about trees that moved since
            roots = roots & self._moved
        near = {
            p: {r for r in roots if p not in self._swept.get(r, ())}
            for p, m in peers.items()
            if self._in_lan(m.rtt_s)
        }
        near = {p: rs for p, rs in near.items() if rs}
        if near:
            return near
        bandwidth = [(r, t.est) for (kind, r), t in hung.items() if kind == "bandwidth"]
        remote = {
            p: {
                r
                for r, est in bandwidth
                if bandwidth_better(m.bw_Bps, est) and p not in self._swept.get(r, ())
            }
            for p, m in peers.items()
            if not self._in_lan(m.rtt_s)
        }
        return {p: rs for p, rs in remote.items() if rs}

    def _wanted(self, peer: int, recheck: bool) -> set[int]:
        """The roots whose trees a probe of ``peer`` asks about (none: every tree).
        While only joiners' new trees lack a parent, those ("Joins"). After a loss
        ("Probes after a loss"): of a climbed-to ancestor, the trees we hang on it by; a
        chain probe, the trees it is for; an extra probe, the trees the loss repaired."""
        if not self._complete():
            return self._orphans() if self._joins_only() else set()
        if recheck or self._focus is None:
            return set()
        if hanging := {r for (_, r), t in self.trees.items() if t.parent == peer and t.estimated}:
            return hanging
        if self._extra_left <= 0:
            return self._chain_roots()
        return self._focus & self.members

    def _probe_candidates(self) -> list[int]:
        """Whom a random probe picks from (module doc, "Repair", "Joins"). With trees we
        have no parent in: their measured roots (a root is in its tree), else peers
        already measured (they may be in it by now), as many times as there are such
        peers, then anyone. With a parent in every tree: every other member, but after
        a loss or a join only those already measured, once we have made ``extra_probes``
        probes among every member ("Probes after a loss"). A measured peer's probe costs one
        InfoRequest; anyone else's a 128 KiB download. A joiner that borrowed its
        sponsor's measurements picks from its LAN among these, if any is there; after
        as many probes in a row as it has measured peers that gave no tree a parent
        (its LAN may not reach one: all of it joined so), it probes those trees' roots."""
        pool = self._probe_pool()
        if not self._lan_only:
            return pool
        if self._lan_misses > len(self.measured):
            return sorted(self._orphans() & self.members - {self.pid}) or pool
        near = [p for p in pool if p in self.measured and self._in_lan(self.measured[p].rtt_s)]
        return near or pool

    def _probe_pool(self) -> list[int]:
        """:meth:`_probe_candidates` before the joiner's LAN rule."""
        others = self._others()
        known = [p for p in others if p in self.measured]
        orphans = self._orphans()
        if not orphans:
            self._misses = 0
            if self._revisit and self._explored >= self.extra_probes:
                return known or others
            self._explored += 1  # the paper's random probes, once, before any revisit
            return others
        roots = sorted(r for r in orphans if r in self.measured)
        if roots:
            return roots
        self._misses += 1
        return known if self._misses <= len(known) else others

    def _on_remeasured(self, peer: int, rtt: float, bw: float | None) -> None:
        """A lower RTT for a measured member (module doc, "Trees"): keep it (and a
        higher rate recomputed with it), and probe the peer again (its Info only) so the
        trees are judged with them."""
        old = self.measured.get(peer)
        if old is None or peer not in self.members or not 0 < rtt < old.rtt_s:
            return
        bw = old.bw_Bps if bw is None else max(bw, old.bw_Bps)
        self.measured[peer] = ProbeResult(peer, rtt, bw)
        self._lan_rtt = min(self._lan_rtt, rtt)
        self._recheck.add(peer)
        self._borrow_from_sponsor(peer, rtt)

    def _in_lan(self, rtt: float) -> bool:
        """An RTT within ``NEAR_RATIO`` of the smallest we measured: our LAN's class."""
        return rtt <= NEAR_RATIO * self._lan_rtt

    def _on_probe_result(self, event: ProbeResult) -> None:
        if event.peer != self._probing:
            return  # a probe of a process that has left meanwhile
        if self._pinging and math.isfinite(event.rtt_s):  # module doc, "Repair"
            self._pinging = False
            like = self._same_class(event.peer, event.rtt_s)
            if like is None:
                self._out.append(Probe(event.peer, PROBE_BYTES))  # nothing to go by: download
                return
            event = ProbeResult(event.peer, event.rtt_s, like.bw_Bps)
        if math.isfinite(event.rtt_s):
            self.measured[event.peer] = event
            self._borrow_from_sponsor(event.peer, event.rtt_s)
        if self._unannounced is not None:  # not near the sponsor (or it is gone)
            self._announce()
        self._probe_result = event
        self._decide()

    def _same_class(self, peer: int, rtt: float) -> ProbeResult | None:
        """The measured peer whose RTT is nearest ``rtt``, if within ``NOISE_SLACK`` of
        it: a peer behind the same links, whose bandwidth ``peer``'s stands for."""
        near = [
            m
            for q, m in self.measured.items()
            if q != peer and abs(m.rtt_s - rtt) <= NOISE_SLACK * rtt
        ]
        return min(near, key=lambda m: (abs(m.rtt_s - rtt), m.peer), default=None)

    def _borrow_from_sponsor(self, peer: int, rtt: float) -> None:
        """A joiner measured its sponsor (its first probe, or a faster round trip since:
        ``Remeasured``): if it is in our LAN (an RTT within ``NEAR_RATIO`` of the
        sponsor's own smallest), take what the sponsor measured as ours, and probe only
        measured peers (module doc, "Joins"). Until then the offer stands."""
        if self._borrow is None or peer != self._borrow[0]:
            return
        sponsor, lan_rtt, measured = self._borrow
        if not rtt <= NEAR_RATIO * lan_rtt:
            return
        self._borrow = None
        for q, q_rtt, bw in measured:
            if q != self.pid and q not in self.measured and q not in self.departed:
                self.measured[q] = ProbeResult(q, q_rtt, bw)
                self._lan_rtt, self._lan_bw = min(self._lan_rtt, q_rtt), max(self._lan_bw, bw)
        self._revisit = self._lan_only = True
        link = self.measured[sponsor]
        near = Near(sponsor, link.rtt_s, link.bw_Bps)
        told = self._unannounced or set()
        self._announce(near)
        for q in self._others():
            if q not in told:
                self._send(q, near)

    def _on_near(self, src: int, m: Near) -> None:
        """``src`` is in ``m.sponsor``'s LAN: what we measured to the sponsor stands for
        it, so probing it costs one InfoRequest, and its trees start as copies of the
        sponsor's (module doc, "Joins"). The sponsor takes the joiner's figures for the
        link between them: it may have measured none of its LAN (its LAN joined
        through it), and its probes after a join go only to peers it measured."""
        mine = m.sponsor == self.pid
        if mine:  # the joiner's figures for our link, if it sent usable ones
            usable = 0 < m.rtt_s < math.inf and m.bw_Bps > 0
            link = ProbeResult(src, m.rtt_s, m.bw_Bps) if usable else None
        else:  # ours for the sponsor
            known = self.measured.get(m.sponsor)
            link = None if known is None else ProbeResult(src, known.rtt_s, known.bw_Bps)
        if link is not None and src not in self.measured and src in self.members:
            self.measured[src] = link
            if mine:  # (a member's figures for the sponsor are in its classes already)
                self._lan_rtt = min(self._lan_rtt, link.rtt_s)
                self._lan_bw = max(self._lan_bw, link.bw_Bps)
        if self.state is State.ACTIVE:
            self._copy_trees(src, m.sponsor)

    def _copy_trees(self, joiner: int, sponsor: int) -> None:
        """In each of ``joiner``'s trees we have no parent in, take the parent we have
        in ``sponsor``'s tree of that kind; the sponsor takes the joiner. The joiner's
        trees start as its sponsor's, with the joiner above the sponsor (one LAN hop
        more), and need no probe. The hop's figures are those of the sponsor's tree (the
        same hop), the sponsor's the fastest it measured (bounds, ``estimated``); the
        distance and rate are the sponsor tree's plus that LAN hop until the parent
        sends its position."""
        for kind in KINDS:
            tree, model = self.trees.get((kind, joiner)), self.trees.get((kind, sponsor))
            if tree is None or tree.parent is not None or model is None:
                continue
            if self.pid == sponsor:  # below the joiner
                parent, rtt, bw, estimated = joiner, self._lan_rtt, self._lan_bw, True
                path, dist, est = (joiner,), self._lan_rtt, self._lan_bw
            elif model.parent is not None and joiner not in model.path:
                parent, rtt, bw, estimated = model.parent, model.rtt, model.bw, model.estimated
                path, dist, est = (joiner, *model.path), model.dist + self._lan_rtt, model.est
            else:
                continue
            tree.parent, tree.rtt, tree.bw, tree.estimated = parent, rtt, bw, estimated
            tree.path, tree.dist, tree.est = path, dist, est
            tree.sent_up = None  # the parent must hear from us
            self._up.add((kind, joiner))
            self._down.add((kind, joiner))

    def _on_info_request(self, src: int, m: InfoRequest) -> None:
        wanted, bars = set(m.roots), {root: (dist, est) for root, dist, est in m.bars}
        positions = tuple(
            t.position(self.pid)
            for t in self.trees.values()
            if (not wanted or t.root in wanted) and not self._barred(t, bars.get(t.root))
        )
        leaving = self.state is not State.ACTIVE
        self._send(src, Info(positions, leaving))

    @staticmethod
    def _barred(tree: _Tree, bar: tuple[float, float] | None) -> bool:
        """Whether a prober's bar (``InfoRequest.bars``) leaves out our position."""
        if bar is None:
            return False
        dist, est = bar
        return tree.dist >= dist if tree.kind == "latency" else tree.est <= est

    def _on_info(self, src: int, m: Info) -> None:
        if src in self.departed:
            return
        if src != self._probing:
            return
        self._probe_info = m
        self._decide()

    def _decide(self) -> None:
        result, info = self._probe_result, self._probe_info
        if result is None or info is None:
            return
        self._probing = None
        complete, joins, orphans = self._complete(), self._joins_only(), len(self._orphans())
        if self.state is State.ACTIVE and not info.leaving and math.isfinite(result.rtt_s):
            self._lan_rtt = min(self._lan_rtt, result.rtt_s)
            self._lan_bw = max(self._lan_bw, result.bw_Bps)
            for pos in info.positions:
                tree = self.trees.get((pos.kind, pos.root))
                if tree is not None and tree.root != self.pid:
                    self._judge(tree, result.peer, pos, result.rtt_s, result.bw_Bps)
        if self._lan_only:
            stuck = orphans and len(self._orphans()) == orphans
            self._lan_misses = self._lan_misses + 1 if stuck else 0
        if not complete and self._complete() and (joins or not self._settled):
            # probed until a parent in every tree new to us: then the extra probes (IV-A)
            self._extra_left, self._chain_left = self.extra_probes, self.chain_probes
            self._focus = None  # of every tree (a joiner may be a better parent anywhere)
        elif complete and self._extra_left > 0:
            self._extra_left -= 1
        elif complete and self._chain_left > 0:
            self._chain_left -= 1
        if self._focus is None and not self._wants_probe():
            # the end of a round that asked about every tree: sweep those we hang on a
            # remote parent by, as after a loss ("Probes after a loss")
            roots = self._remote_roots()
            self._focus, self._moved, self._swept = roots, set(roots), {}
        if not self._wants_probe():
            self._focus = set()  # the next loss's probes ask about the trees it repairs
            self._swept, self._moved = {}, set()
        if self._complete():
            self._settled, self._joined = True, set()

    def _remote_roots(self) -> set[int]:
        """The roots of the trees we hang on a parent outside our LAN class by."""
        return {
            r
            for (_, r), t in self.trees.items()
            if t.parent is not None and not self._in_lan(t.rtt)
        }

    def _orphans(self) -> set[int]:
        """The roots of the trees we have no parent in (but our own)."""
        return {r for (_, r), t in self.trees.items() if t.parent is None} - {self.pid}

    def _complete(self) -> bool:
        """Whether we have a parent in every tree but our own."""
        return not self._orphans()

    def _joins_only(self) -> bool:
        """Whether every tree we have no parent in is a new tree of a member that joined
        since we first had a parent everywhere (true when there is none)."""
        return self._orphans() <= self._joined

    def _judge(self, tree: _Tree, cand: int, pos: Position, rtt: float, bw: float) -> None:
        if tree.parent == cand:
            if tree.estimated and self.pid not in pos.path:  # measured now: replace bounds
                tree.rtt, tree.bw, tree.estimated = rtt, bw, False
                self._position_from(tree, pos.dist, pos.est, pos.nchildren, (*pos.path, cand))
                self._down.add((tree.kind, tree.root))
            return
        if self.pid in pos.path:
            return
        if pos.root != cand and not pos.path:
            return  # cand is not connected to this tree
        if tree.kind == "latency":
            if not latency_better(
                rtt_cand=rtt,
                cand_dist=pos.dist,
                cand_children=pos.nchildren,
                rtt_parent=tree.rtt,
                dist=tree.dist,
                lan_rtt=self._lan_rtt,
                overhead=self.send_overhead_s,
            ):
                return
        else:
            if pos.est <= 0:
                return
            offer = bandwidth_offer(pos.est, bw, pos.nchildren + 1, self._lan_bw)
            nearer, remote = bandwidth_class(bw, tree.bw)
            if tree.parent is not None and not bandwidth_better(
                offer, tree.est, nearer=nearer, remote=remote
            ):
                return
        self._move(tree, cand, pos, rtt, bw)

    def _move(self, tree: _Tree, cand: int, pos: Position, rtt: float, bw: float) -> None:
        """Attach to ``cand``; detach from the old parent once ``cand`` has taken us
        (its first position update): make before break, so that a broadcast passing
        meanwhile still finds our subtree in one of the two parents' reach sets."""
        key = (tree.kind, tree.root)
        self._detach_old(tree, keep=cand)
        if tree.parent is not None and tree.parent != cand:
            tree.old_parent = tree.parent
        tree.parent, tree.rtt, tree.bw, tree.estimated, tree.adopted = cand, rtt, bw, False, 0
        tree.fallback = ()
        self._position_from(tree, pos.dist, pos.est, pos.nchildren + 1, (*pos.path, cand))
        tree.sent_up = None  # the new parent must hear from us
        if self._focus is not None:  # a tree that moved since a loss is repaired too:
            self._focus.add(tree.root)  # its sweep starts afresh ("Probes after a loss")
            self._swept[tree.root] = set()
            self._moved.add(tree.root)
        self._up.add(key)
        self._down.add(key)

    def _detach_old(self, tree: _Tree, keep: int | None = None) -> None:
        """Send the detach a move left pending (see :meth:`_move`)."""
        old, tree.old_parent = tree.old_parent, None
        if old is not None and old != keep:
            self._batch_child(old, ChildItem(tree.kind, tree.root, attach=False))

    def _position_from(self, tree: _Tree, dist: float, est: float, n: int, path: tuple) -> None:
        tree.dist = dist + tree.rtt + self.send_overhead_s * (n - 1)
        tree.est = bandwidth_offer(est, tree.bw, max(n, 1), self._lan_bw)
        tree.path = path

    def _batch_child(self, parent: int, item: ChildItem) -> None:
        self._child_batch.setdefault(parent, []).append(item)

    def _on_child_updates(self, src: int, m: ChildUpdates) -> None:
        if self.state is not State.ACTIVE:
            self._redirect(src, m)  # leaving: send the child up to our parent
            return
        self._end_loan(src)
        for item in m.items:
            key = (item.kind, item.root)
            tree = self.trees.get(key)
            if tree is None:
                continue
            if not item.attach:
                old = tree.children.pop(src, None)
                if old is not None:
                    tree.former[src] = old.reach  # for late broadcasts (module doc)
                    tree.reached(src, old.reach)
                    self._up.add(key)
                    self._down.add(key)
                continue
            old = tree.children.get(src)  # None: it came back, its reach is current
            lost = (tree.former.get(src, NodeSet()) | old.reach) - item.reach if old else None
            if lost:  # vnodes it no longer reaches (module doc, "Repair")
                tree.former[src] = lost
            else:
                tree.former.pop(src, None)
            tree.reached(src, item.reach)
            new = old is None
            tree.children[src] = _Child(item.reach, item.summary, item.rtt, item.bw)
            self._up.add(key)
            if new:
                self._down.add(key)
                self._new_children.setdefault(key, set()).add(src)

    def _redirect(self, src: int, m: ChildUpdates) -> None:
        """A child attached to us after we left its tree: re-attach to our parent then
        (module doc, "Repair")."""
        items = [
            self._former[i.kind, i.root]
            for i in m.items
            if i.attach and (i.kind, i.root) in self._former
        ]
        if items:
            self._send(src, Adopt(tuple(items)))

    def _on_adopt(self, src: int, m: Adopt) -> None:
        """Our parent ``src`` leaves: move at once, without probing, to the parent it
        names (module doc, "Repair"); at most as many adoptions in a row as there are
        members, so redirects among leavers end."""
        if self.state is not State.ACTIVE or src in self.departed:
            return
        for item in m.items:
            key = (item.kind, item.root)
            tree = self.trees.get(key)
            named = (item.parent, *item.fallback)
            j = next((j for j, p in enumerate(named) if p not in self.departed), None)
            if tree is None or tree.parent != src or j is None:
                continue  # moved away meanwhile, or every parent named left: climb (Leaving)
            parent = named[j]
            if parent == self.pid or tree.adopted >= len(self.members):
                continue
            tree.fallback = named[j + 1 :]
            if tree.old_parent == parent:
                tree.old_parent = None  # back to where we were: no detach
            up = len(tree.path) >= 2 and tree.path[-2] == parent
            tree.path = tree.path[:-1] if up else (*tree.path[:-1], parent)
            tree.parent, tree.estimated = parent, True
            tree.adopted += 1
            tree.rtt += item.rtt  # bounds through the leaver, until the next probe of it
            tree.bw = min(tree.bw, item.bw)
            tree.sent_up = None  # the new parent must hear from us
            self._up.add(key)
            self._down.add(key)
            self._renew_after_loss(item.root)  # then improve, as the paper's repair

    def _renew_after_loss(self, root: int, chain: bool = False) -> None:
        """A tree of ``root`` lost its parent: renew the extra probes (sec. IV-A's
        repair; with ``chain``, the chain probes too), to peers already measured, asking
        about the trees repaired since only (module doc, "Probes after a loss")."""
        self._extra_left = self.extra_probes
        if chain:
            self._chain_left = self.chain_probes
        self._revisit = self._revisit or bool(self.measured)
        if self._focus is not None:  # (None: probes under way for every tree go on so)
            self._focus.add(root)

    def _on_parent_updates(self, src: int, m: ParentUpdates) -> None:
        if self.state is not State.ACTIVE:
            return
        for pos in m.items:
            key = (pos.kind, pos.root)
            tree = self.trees.get(key)
            if tree is None or tree.parent != src:
                continue  # stale: we moved away meanwhile
            self._detach_old(tree)  # the new parent has taken us
            path = (*pos.path, src)
            if self.pid in path and self._breaks_cycle(path):
                # crossing moves made a cycle: its highest id leaves it (sec. IV-B repair)
                self._batch_child(src, ChildItem(pos.kind, pos.root, attach=False))
                self._detach_old(tree)
                tree.disconnect()
                self._extra_left = self.extra_probes  # (not the chain budget)
                self._focus = None  # no one left: every tree may do better
            else:
                self._position_from(tree, pos.dist, pos.est, pos.nchildren, path)
            self._down.add(key)

    def _breaks_cycle(self, path: tuple[int, ...]) -> bool:
        """True if we leave the cycle ``path`` shows us in: we have the highest id of
        the ancestors since our last place on it (the cycle as it stands; earlier
        places are older rounds or a stale prefix), or the path is longer than the
        members (a cycle whose highest id does not act: anyone ends it then)."""
        last = len(path) - 1 - path[::-1].index(self.pid)
        return self.pid == max(path[last:]) or len(path) > len(self.members) + 1

    def _reach(self, tree: _Tree) -> NodeSet:
        ranges = [r for c in tree.children.values() for r in c.reach.ranges]
        ranges += [r for lent in self._lent.values() for r in lent.ranges]
        return NodeSet(tuple(ranges) + self._table().mine().ranges)  # one normalisation

    def _end_loan(self, joiner: int) -> None:
        """The vnodes handed to ``joiner`` leave our reach: it attached (below us, where
        its reach brings them back), left, or did not attach in time ("Joins")."""
        if self._lent.pop(joiner, None) is not None:
            self._mark_all_up()

    def _summary(self, tree: _Tree) -> Summary:
        edges = [Edge(c.rtt, c.bw, c.summary) for c in tree.children.values()]
        if tree.kind == "latency":
            return latency_summary(edges, self.send_overhead_s)
        return bandwidth_summary(edges, self._lan_bw)

    def _ordered_children(self, tree: _Tree) -> list[int]:
        kids = sorted(tree.children)
        return child_order(kids, [tree.children[c].summary.descendants for c in kids])

    def _flush(self) -> None:
        """Send the tree updates this event caused (batched per neighbour), then probe."""
        if self.state is State.ACTIVE:
            for key in sorted(self._up, key=repr):
                tree = self.trees.get(key)
                if tree is None or tree.parent is None:
                    continue
                now = (self._reach(tree), self._summary(tree))
                sent = tree.sent_up
                if sent is None or now[0] != sent[0] or summary_moved(now[1], sent[1]):
                    tree.sent_up = now
                    item = ChildItem(key[0], key[1], True, now[0], now[1], tree.rtt, tree.bw)
                    self._batch_child(tree.parent, item)
            down: dict[int, list[Position]] = {}
            for key in sorted(self._down, key=repr):
                tree = self.trees.get(key)
                if tree is None:
                    continue
                pos = tree.position(self.pid)
                now = (pos.dist, pos.est, pos.nchildren, pos.path)
                new = self._new_children.get(key, set())
                targets = tree.children if now != tree.sent_down else new
                tree.sent_down = now
                for c in sorted(targets):
                    if c in tree.children:
                        down.setdefault(c, []).append(pos)
            for c, items in sorted(down.items()):
                self._send(c, ParentUpdates(tuple(items)))
        for parent, items in sorted(self._child_batch.items()):
            if parent in self.members:
                self._send(parent, ChildUpdates(tuple(items)))
        self._up.clear()
        self._down.clear()
        self._new_children.clear()
        self._child_batch.clear()
        self._maybe_probe()

    # -- broadcast (sec. IV-D) --------------------------------------------------------------
    def _on_bcast_requested(self, event: BcastRequested) -> None:
        table = self._table()
        if event.root not in table.owned:
            raise LocalProtocolError(f"root vnode {event.root!r} is not mapped to {self.pid}")
        if event.nbytes < 0:
            raise LocalProtocolError(f"nbytes must be >= 0, got {event.nbytes!r}")
        kind = event.kind or self.choose_kind(event.nbytes)
        if kind not in KINDS:
            raise LocalProtocolError(f"tree kind must be one of {KINDS}, got {kind!r}")
        size = self.segment_size(event.nbytes)
        n = max(1, math.ceil(event.nbytes / size)) if size > 0 else 1
        sliceable = (
            isinstance(event.payload, bytes | bytearray | memoryview)
            and len(event.payload) == event.nbytes
        )
        for i in range(n):  # each segment goes down the tree as soon as it is cut
            lo, hi = i * size, min(event.nbytes, (i + 1) * size)
            payload = event.payload[lo:hi] if sliceable and n > 1 else event.payload
            m = Bcast(
                event.op_id,
                event.root,
                kind,
                self.pid,
                table.everything,
                True,
                0,
                hi - lo,
                payload,
                i,
                n,
            )
            self._spread(m)

    def _segment_cost(self, summary: Summary) -> float:
        """``c``: a segment message's fixed cost, its header at the tree's rate included."""
        header = HEADER_BYTES + self._table().everything.nbytes
        return self.segment_cost_s + header * (summary.b if math.isfinite(summary.b) else 0.0)

    def segment_size(self, nbytes: int) -> int:
        """The model's segment size for an ``nbytes`` broadcast on this process's own
        bandwidth tree (:func:`~gridcoll.phoenix.trees.segment_size`)."""
        tree = self.trees.get(("bandwidth", self.pid))
        if tree is None:
            return nbytes
        summary = self._summary(tree)
        return segment_size(summary, nbytes, self._segment_cost(summary))

    def choose_kind(self, nbytes: int) -> str:
        """The tree the model predicts faster for an ``nbytes`` broadcast from here."""
        lat, bw = self.trees.get(("latency", self.pid)), self.trees.get(("bandwidth", self.pid))
        if lat is None or bw is None:
            return "latency"
        summary = self._summary(bw)
        return choose_tree(self._summary(lat), summary, nbytes, self._segment_cost(summary))

    def _on_bcast(self, src: int, m: Bcast) -> None:
        self._spread(m)

    def _spread(self, m: Bcast) -> None:
        """Rules I, II and III of sec. IV-D, for one segment."""
        table = self._table()
        mine = m.targets & table.mine()
        if m.resent:
            self._resent_ops.add(m.op_id)
        fresh = []
        for v in mine:
            if table.mark_delivered(v, m.op_id, m.segment, m.nsegments):
                fresh.append(v)
            elif m.op_id in self._resent_ops or self.failed or m.op_id in table.owned[v].delivered:
                self.duplicates += 1  # a copy after a failure (module doc, "Failures")
            else:
                raise RemoteProtocolError(
                    f"broadcast {m.op_id!r} segment {m.segment} reached vnode {v} twice"
                )
        if fresh:
            self._out.append(Deliver(m.op_id, frozenset(fresh), m.payload, m.segment, m.nsegments))
            if m.nsegments > 1 and m.op_id not in self._origins:
                self._origins[m.op_id] = (m.kind, m.tree_root, m.nsegments)
                if len(self._origins) > _ORIGINS_KEPT:
                    del self._origins[next(iter(self._origins))]
            if m.resent and m.nsegments > 1:  # a vnode taken over starts afresh
                self._watch(m.op_id)
        rest = m.targets - mine
        tree = self.trees.get((m.kind, m.tree_root))
        if (
            m.via_tree
            and tree is not None
            and self.state in (State.ACTIVE, State.LEAVING, State.LEFT)  # see "Repair"
            and m.hops <= len(self.members)
        ):
            kids = [(c, tree.children[c].reach) for c in self._ordered_children(tree)]
            share: dict[int, NodeSet] = {}
            for c, reach in [*kids, *sorted(tree.former.items())]:  # "Repair"
                if sub := rest & reach:
                    share[c] = share.get(c, NodeSet()) | sub  # one message per child
                    rest = rest - sub
            for c, sub in share.items():
                self._send_bcast(c, _replace_targets(m, sub, True))
        by_owner: dict[int, list[int]] = {}
        for v in rest:
            owner = self._route(v, m.hops) if self.failed else table.owner(v)
            by_owner.setdefault(owner, []).append(v)
        if taken := by_owner.pop(self.pid, None):  # a dead owner's, taken over just now
            self._spread(replace(m, targets=NodeSet.of(taken)))
        for owner in [o for o in by_owner if o in self.failed]:  # and no heir: report it
            self._out.append(Abandoned(m.op_id, frozenset(by_owner.pop(owner))))
        groups = sorted(by_owner.items())
        if m.resent and groups:  # a chain, nearest first (module doc, "Failures")
            nearest = min(groups, key=lambda g: (self._rtt(g[0]), g[0]))[0]
            targets = NodeSet.of(v for _, vs in groups for v in vs)
            self._send_bcast(nearest, _replace_targets(m, targets, False))
            return
        while groups:  # rule III as a binomial relay: log2(owners) + 1 sends from here
            half = groups[len(groups) // 2 :] if len(groups) > 1 else groups
            targets = NodeSet.of(v for _, vs in half for v in vs)
            self._send_bcast(half[0][0], _replace_targets(m, targets, False))
            groups = groups[: len(groups) // 2] if len(groups) > 1 else []

    def _watch(self, op_id: Hashable) -> None:
        """Watch pipelined broadcast ``op_id`` every ``stall_s`` while our vnodes have
        only part of it (module doc, "Failures")."""
        if op_id not in self._stalls and (held := self._held(op_id))[1]:
            self._stalls[op_id] = (held[0], 0)
            self._out.append(SetTimer(("stall", op_id), self.stall_s))

    def _held(self, op_id: Hashable) -> tuple[int, NodeSet]:
        """Pipelined broadcast ``op_id`` at our vnodes: the segments they hold (summed)
        and those that some vnode holding part of it lacks (none if forgotten)."""
        held, lacking = 0, NodeSet()
        if op_id not in self._origins:
            return held, lacking
        n = self._origins[op_id][2]
        for s in self._table().owned.values():
            if (got := s.partial.get(op_id)) is not None:
                held += len(got)
                lacking = lacking | (NodeSet.span(0, n) - got)
        return held, lacking

    def _on_stall(self, op_id: Hashable) -> None:
        """A watched broadcast's look: if no segment came since the last, take what our
        vnodes lack from the copies we kept of what we sent, and ask our parent in its
        tree for the rest (``Want``, down to our whole subtree), looking again after
        twice as long; after ``WANTS`` asks in vain, abandon it (:class:`Abandoned`)."""
        last, asked = self._stalls.pop(op_id, (0, 0))
        held, lacking = self._held(op_id)
        if not lacking:
            return
        if held == last:
            if asked == WANTS:
                self._out.append(Abandoned(op_id, frozenset(self._table().abandon(op_id))))
                return
            copies = self._copies(op_id, lacking)
            mine = NodeSet.of(v for v, s in self._table().owned.items() if op_id in s.partial)
            for segment in sorted(copies):
                self._spread(replace(copies[segment], targets=mine, via_tree=False, resent=True))
            kind, root, _ = self._origins[op_id]
            tree = self.trees.get((kind, root))
            rest = lacking - NodeSet.of(copies)
            if rest and tree is not None and tree.parent is not None:
                self._send(tree.parent, Want(op_id, kind, root, rest, self._reach(tree)))
            asked += 1
        self._stalls[op_id] = (held, asked)
        self._out.append(SetTimer(("stall", op_id), self.stall_s * 2**asked))

    def _copies(self, op_id: Hashable, segments: NodeSet) -> dict[int, Bcast]:
        """A kept copy (``resend_ops``) of each of these segments we sent, by segment."""
        copies: dict[int, Bcast] = {}
        for _, _, sent in self._sent.get(op_id, ()):
            if sent.segment in segments:
                copies.setdefault(sent.segment, sent)
        return copies

    def _on_want(self, src: int, m: Want) -> None:
        """Send ``src`` the segments it asks for that we kept copies of, down the tree;
        ask our own parent for the rest, unless we lack them too (our own ask covers
        our subtree, ``src``'s with it)."""
        copies = self._copies(m.op_id, m.segments)
        for segment in sorted(copies):
            again = replace(copies[segment], targets=m.targets, via_tree=True, hops=0, resent=True)
            self._send_bcast(src, again)
        rest = m.segments - NodeSet.of(copies)
        if m.op_id in self._stalls:
            rest = rest - self._held(m.op_id)[1]
        tree = self.trees.get((m.kind, m.tree_root))
        if rest and tree is not None and tree.parent is not None and m.hops < len(self.members):
            self._send(tree.parent, replace(m, segments=rest, hops=m.hops + 1))

    def _rtt(self, pid: int) -> float:
        """What we measured of the round trip to ``pid`` (inf: never measured)."""
        known = self.measured.get(pid)
        return math.inf if known is None else known.rtt_s

    def _send_bcast(self, dst: int, m: Bcast) -> None:
        """Send, and keep the message (``resend_ops``, ``resend_bytes``) in case ``dst``
        dies."""
        self._send(dst, m)
        if not self.resend_ops:
            return
        self._sent.setdefault(m.op_id, []).append((dst, self._sends_to[dst], m))
        self._sent_bytes += m.nbytes
        while len(self._sent) > 1 and (
            len(self._sent) > self.resend_ops or self._sent_bytes > self.resend_bytes
        ):
            oldest = next(iter(self._sent))
            self._sent_bytes -= sum(old.nbytes for *_, old in self._sent.pop(oldest))

    # -- reduction (sec. IV-E) --------------------------------------------------------------
    def timeout(self, nbytes: int = 0) -> float:
        """How long this process waits for its children's ``nbytes`` of data: its largest
        estimated distance to any root (sec. IV-E, a 1-byte figure), plus the time its
        own latency subtrees' summaries predict for ``nbytes`` to cross them
        (``b * nbytes``: an array takes longer than the paper's integers)."""
        lat = [t for (k, _), t in self.trees.items() if k == "latency"]
        dists = [t.dist for t in lat if 0 < t.dist < math.inf]
        if not dists:
            return self.default_timeout_s
        per_byte = max((self._summary(t).b for t in lat if t.children), default=0.0)
        return max(dists) + per_byte * nbytes

    def _reduce_state(self, op_id: Hashable, root: int, op: Callable, nbytes: int) -> _Reduce:
        r = self._reduces.get(op_id)
        if r is None:
            r = self._reduces[op_id] = _Reduce(op_id, root, op, nbytes)
            self._out.append(SetTimer(("reduce", op_id), self.timeout(nbytes)))
        return r

    def _on_reduce_requested(self, event: ReduceRequested) -> None:
        if event.nbytes < 0:
            raise LocalProtocolError(f"nbytes must be >= 0, got {event.nbytes!r}")
        r = self._reduce_state(event.op_id, event.root, event.op, event.nbytes)
        r.values.update(event.values)
        self._contribute(r)

    def _contribute(self, r: _Reduce) -> None:
        table = self._table()
        self._route(r.root)  # (takes a dead root owner's vnodes over first, if ours)
        value, covered = None, []
        for v in sorted(set(r.values) & set(table.owned)):
            if not table.mark_contributed(v, r.op_id):
                continue
            if table.owned[v].recovered:  # counted only where nothing else covers it
                one = NodeSet.of([v])
                m = Partial(r.op_id, r.root, r.op, r.values[v], one, False, 0, r.nbytes, True)
                self._on_partial(self.pid, m)
                continue
            value = r.values[v] if not covered else r.op(value, r.values[v])
            covered.append(v)
        if covered:
            self._absorb(r, value, NodeSet.of(covered), hops=0)

    def _absorb(self, r: _Reduce, value: object, covered: NodeSet, hops: int) -> None:
        if r.root in self._table().owned:
            self._merge_root(r.op_id, r.root, r.op, value, covered, r.nbytes)
        elif not r.expired and self.state is State.ACTIVE:
            if not r.covered.isdisjoint(covered):
                raise RemoteProtocolError(
                    f"reduction {r.op_id!r} counted {r.covered & covered} twice"
                )
            r.value = _combine(r.op, r.value, r.covered, value, covered)
            r.covered = r.covered | covered
            self._flush_if_complete(r)
        else:
            self._send_up(r, value, covered, hops, force_p2p=self.state is not State.ACTIVE)

    def _flush_if_complete(self, r: _Reduce) -> None:
        """Send our partial sum up once every child has reported: no need to wait."""
        tree = self.trees.get(("latency", self._route(r.root)))
        if tree is not None and tree.parent is not None and not self._reach(tree) - r.covered:
            self._flush_reduce(r)

    def _send_up(
        self, r: _Reduce, value: object, covered: NodeSet, hops: int, force_p2p: bool
    ) -> None:
        owner = self._route(r.root)
        if owner == self.pid:  # the root vnode was a dead process's: ours now
            self._merge_root(r.op_id, r.root, r.op, value, covered, r.nbytes)
            return
        tree = self.trees.get(("latency", owner))
        if (
            not force_p2p
            and tree is not None
            and tree.parent is not None
            and hops <= len(self.members)
        ):
            dst, via_tree = tree.parent, True
        else:
            dst, via_tree = owner, False
        self._send(
            dst, Partial(r.op_id, r.root, r.op, value, covered, via_tree, hops + 1, r.nbytes)
        )

    def _flush_reduce(self, r: _Reduce, force_p2p: bool = False) -> None:
        r.expired = True
        if r.covered:
            value, covered, r.value, r.covered = r.value, r.covered, None, NodeSet()
            self._send_up(r, value, covered, 0, force_p2p or self.state is not State.ACTIVE)

    def _on_partial(self, src: int, m: Partial) -> None:
        table = self._table()
        dst = self._route(m.root, m.hops)
        if m.root in table.owned:
            self._merge_root(
                m.op_id, m.root, m.op, m.value, m.covered, m.nbytes, recovered=m.recovered
            )
        elif m.via_tree and self.state is State.ACTIVE and not m.recovered:
            r = self._reduce_state(m.op_id, m.root, m.op, m.nbytes)
            self._absorb(r, m.value, m.covered, m.hops)
        else:
            self._send(dst, replace(m, via_tree=False, hops=m.hops + 1))

    def _merge_root(
        self,
        op_id: Hashable,
        root: int,
        op: Callable,
        value: object,
        covered: NodeSet,
        nbytes: int,
        done: bool = False,
        recovered: bool = False,
    ) -> None:
        s = self._sums.get(op_id)
        if s is None:
            s = RootSum(op_id, root, op, None, NodeSet(), done, nbytes)
            r = self._reduces.get(op_id)
            self._out.append(
                SetTimer(("reduce-give-up", op_id), self.give_up_factor * self.timeout(nbytes))
            )
            if r is not None and r.covered:  # what we held as an inner node
                s = replace(s, value=r.value, covered=r.covered)
                r.value, r.covered = None, NodeSet()
            self._sums[op_id] = s
        if s.done or done:
            self._sums[op_id] = replace(s, done=True)
            return  # data after ReduceDone is dropped (module doc)
        if recovered:
            if len(covered) != 1:
                raise RemoteProtocolError(f"recovered data of reduction {op_id!r} for {covered}")
            (v,) = covered
            if v not in dict(s.aside):
                s = self._sums[op_id] = replace(s, aside=(*s.aside, (v, value)))
        else:
            if not s.covered.isdisjoint(covered):
                raise RemoteProtocolError(
                    f"reduction {op_id!r} counted {s.covered & covered} twice"
                )
            total = _combine(op, s.value, s.covered, value, covered)
            s = self._sums[op_id] = replace(s, value=total, covered=s.covered | covered)
        self._finish(s)

    def _finish(self, s: RootSum, give_up: bool = False) -> None:
        """Emit ReduceDone once the root's sum and the recovered data aside cover the
        namespace but for the vnodes whose owners died while it ran (their data will
        not come: module doc, "Failures"), or when giving up; the aside data is
        counted for the vnodes ``covered`` lacks."""
        total, covered = s.value, s.covered
        for v, x in sorted(s.aside, key=lambda item: item[0]):
            if v not in covered:
                total = _combine(s.op, total, covered, x, NodeSet.of([v]))
                covered = covered | NodeSet.of([v])
        everything = self._table().everything
        if not give_up and (everything - covered) - self._lacking.get(s.op_id, NodeSet()):
            return
        self._lacking.pop(s.op_id, None)
        self._sums[s.op_id] = replace(s, done=True)
        self._out.append(ReduceDone(s.op_id, total, frozenset(everything - covered)))

    def _on_timer(self, timer: Hashable) -> None:
        if not isinstance(timer, tuple) or len(timer) != 2:
            raise LocalProtocolError(f"unknown timer {timer!r}")
        kind, op_id = timer
        if self.state in (State.LEFT,):
            return
        if kind == "reduce":
            r = self._reduces.get(op_id)
            if r is not None and not r.expired:
                if r.root in self._table().owned:
                    r.expired = True
                else:
                    self._flush_reduce(r)
        elif kind == "stall":
            self._on_stall(op_id)
        elif kind == "lent":
            self._end_loan(op_id)
        elif kind == "reduce-give-up":
            s = self._sums.get(op_id)
            if s is not None and not s.done and s.root in self._table().owned:
                self._finish(s, give_up=True)
        else:
            raise LocalProtocolError(f"unknown timer {timer!r}")
