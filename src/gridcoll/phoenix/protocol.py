"""Phoenix (seed 004): one process of the protocol, as a sans-I/O state machine.

Saito, Taura and Chikayama (seed 004) let processes join and leave a computation while
broadcasts and reductions go on: messages are addressed to virtual nodes (sec. III),
each process measures the network with random probes and keeps, for every root, a
latency-aware and a bandwidth-aware spanning tree (sec. IV-A to IV-C); a broadcast
carries per child the set of virtual nodes to reach through it and falls back to
point-to-point messages (sec. IV-D); a reduction waits for its children only until a
timeout (sec. IV-E). :class:`Process` is that protocol for one process, written in the
style of h11: it is fed events and returns actions, and does no I/O, reads no clock
and draws random numbers only from the ``random.Random`` it is given. The events it
takes and the actions it returns are :mod:`~gridcoll.phoenix.events`; the messages
processes exchange, each field's encoding and charged size defined once, are
:mod:`~gridcoll.phoenix.messages`; its states and their table are
:mod:`~gridcoll.phoenix.states`; the sub-protocols are its collaborators (membership,
ownership, probing, forest, broadcast, reduction).

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

States and transitions (the table is :data:`~gridcoll.phoenix.states.TRANSITIONS`)
-----------------------------------------------------------------------------------
``IDLE --Start--> ACTIVE`` (founder); ``IDLE --JoinRequested--> JOINING --Welcome-->
ACTIVE``; ``ACTIVE --LeaveRequested--> LEAVING --last LeaveAck--> LEFT`` (or the last
awaited member's ``PeerFailed``); any state ``--exception--> ERROR``. Every change goes
through :func:`~gridcoll.phoenix.states.transition`, which refuses a move the table
lacks. A LEFT process only forwards stragglers (below). :class:`PeerFailed` otherwise
changes no state (a JOINING, ACTIVE, LEAVING or LEFT process takes it).

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
  reach every live process below it (figures: docs/phoenix.md, "Why the rules",
  "Failures"). Still uncovered: a vnode whose dead owner's senders all
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
never measure anyone else (its LAN then enters other LANs' trees by the slower of its
links). With a parent in every tree they ask only about the
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
broadcasts. A probe after a loss goes first to a LAN peer (measured, in our LAN
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
extra probes may never reach the few peers behind the faster one. A tree that moves onto
a remote parent after a loss is swept afresh, its LAN first, extra probes left or not
(``_moved``): a member of a LAN cut off from the root takes the first connected peer it
finds, and may reach a faster link by the remote sweep while a LAN peer it asked before
the move has become the LAN's gateway since (two members of a LAN may end below two
remote processes, both flows on one wide-area link). A round of probes that asked about
every tree (settling, a join's) ends with the same sweep, of the trees it left on a
remote parent, a joiner that borrowed included: random probes leave LAN members on
wide-area parents, and on real processes a LAN that joins through its first member all
at once, before that member has measured anyone, borrows nothing and leaves more
wide-area edges than Property I's one per LAN (figures: docs/phoenix.md, "Measured
figures behind the core's rules"). A parent known only by bounds (a climb to an ancestor
never measured) is measured even with no extra probe left. A tree with no parent probes
its root if measured, else measured peers (one round each), else anyone.

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
Invariant B, and the hop bound ends a cycle. (Figures: docs/phoenix.md, "Why the rules",
"Repair".)

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
took the other LAN's peers for its own LAN and its joiners for remote. The offer stands
until a round trip shows the sponsor near: on a busy machine the first ping-pongs can
take longer than a wide-area round trip, and a faster one timed later
(:class:`Remeasured`, from heartbeats) settles it.

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
    copies the sponsor's trees as it makes the joiner's, before it would probe for them
    (one LAN probe, some milliseconds, delays the Updates).
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
    A joiner that borrowed knows that its smallest RTT is a LAN one, so its chain probes
    count a parent within ``NEAR_RATIO`` of it as in its LAN, not remote
    (:func:`~gridcoll.phoenix.trees.chained`, ``lan_known``): its chain probes would
    otherwise go to trees whose root is a few LAN hops away.
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
and not kept: docs/phoenix.md, "Measured figures behind the core's rules" and "Why the
rules").

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

import random
from collections.abc import Hashable, Iterable, Mapping, Sequence

from gridcoll.errors import LocalProtocolError, ProtocolError, RemoteProtocolError
from gridcoll.phoenix.broadcast import WANTS, Broadcast
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
from gridcoll.phoenix.forest import Forest, TreeState
from gridcoll.phoenix.membership import Membership
from gridcoll.phoenix.messages import (
    HEADER_BYTES,
    KINDS,
    Adopt,
    Bcast,
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
    Update,
    Want,
    Welcome,
    message_bytes,
)

# Messages only the collaborators build, importable from here as before.
from gridcoll.phoenix.messages import AdoptItem as AdoptItem
from gridcoll.phoenix.messages import ChildItem as ChildItem
from gridcoll.phoenix.messages import Position as Position
from gridcoll.phoenix.messages import RootSum as RootSum
from gridcoll.phoenix.ownership import SITE_SHIFT, Ownership
from gridcoll.phoenix.probing import Prober
from gridcoll.phoenix.reduction import Reduction
from gridcoll.phoenix.states import ACCEPTS as _ACCEPTS
from gridcoll.phoenix.states import TRANSITIONS, State, transition
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


SEGMENT_COST_S = 20e-6
"""Default fixed cost of one segment message (per-message CPU, protocol and wire
overheads; ``c`` of :func:`~gridcoll.phoenix.trees.segment_size`): a few tens of
microseconds per message, as MPI over TCP on the paper's Gigabit-era clusters."""


def _tree_update(event: Event) -> bool:
    """A tree update from a neighbour: what :meth:`Process.handle_all` runs together."""
    return type(event) is Received and isinstance(event.message, ChildUpdates | ParentUpdates)


_DATA = (Bcast, Partial, Handover, Update)
"""Messages a dead process sent before it died that still count: data, vnodes and
where it sent vnodes."""


class Process:
    """One process of the protocol (see the module doc).

    A coordinator over collaborators, one per sub-protocol, each owning its state:
    ``membership`` (:class:`~gridcoll.phoenix.membership.Membership`: joins and leaves),
    ``ownership`` (:class:`~gridcoll.phoenix.ownership.Ownership`: vnode handovers and
    failover), ``prober`` (:class:`~gridcoll.phoenix.probing.Prober`: sec. IV-A),
    ``forest`` (:class:`~gridcoll.phoenix.forest.Forest`: this process's place in the
    trees, sec. IV-B, IV-C), ``broadcast`` (:class:`~gridcoll.phoenix.broadcast.Broadcast`:
    sec. IV-D) and ``reduction`` (:class:`~gridcoll.phoenix.reduction.Reduction`: sec.
    IV-E). :meth:`handle` is the one entry point: it dispatches each event or message
    to the collaborator it concerns. The state the collaborators share (the vnode
    table, the members, the trees, the measurements, the options, :meth:`send`) stays
    here; a collaborator reaches it, and the other collaborators, through ``p``.

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
        self.trees: dict[tuple[str, int], TreeState] = {}
        self.remember = remember
        self.measured: dict[int, ProbeResult] = {}  # peer -> its measurement
        self.stragglers = 0
        self.resend_ops, self.resend_bytes = resend_ops, resend_bytes
        self.stall_s = stall_s
        self.failed: set[int] = set()  # members reported dead (PeerFailed)
        self.from_failed = 0  # control messages from dead members (dropped)
        self.sends_to: dict[int, int] = {}  # dst -> messages sent to it (n: the n-th)
        self.founders = founder_vnodes
        self.out: list[Action] = []  # the actions of the events under way
        self.membership = Membership(self)
        self.ownership = Ownership(self)
        self.prober = Prober(self)
        self.forest = Forest(self)
        self.broadcast = Broadcast(self)
        self.reduction = Reduction(self)

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
        self.out = []
        try:
            for i, event in enumerate(events):
                if not isinstance(event, _ACCEPTS[self.state]):
                    raise LocalProtocolError(
                        f"process {self.pid} in state {self.state.name} cannot take {event!r}"
                    )
                self._dispatch(event)
                run_goes_on = i + 1 < len(events) and _tree_update(events[i + 1])
                if not (run_goes_on and _tree_update(event)):
                    self.forest.flush()
        except Exception as err:
            self.state = transition(self.state, Exception)
            self.error = f"{type(err).__name__}: {err}"
            raise
        return self.out

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
        return self.prober.probing is not None or self.prober.wants_probe()

    # -- what drivers read of the collaborators ------------------------------------------
    @property
    def probes_made(self) -> int:
        """Probes made so far (:class:`~gridcoll.phoenix.probing.Prober`)."""
        return self.prober.probes_made

    @property
    def duplicates(self) -> int:
        """Resent segments a vnode already had, dropped
        (:class:`~gridcoll.phoenix.broadcast.Broadcast`)."""
        return self.broadcast.duplicates

    def segment_size(self, nbytes: int) -> int:
        """:meth:`Broadcast.segment_size <gridcoll.phoenix.broadcast.Broadcast.segment_size>`."""
        return self.broadcast.segment_size(nbytes)

    def choose_kind(self, nbytes: int) -> str:
        """:meth:`Broadcast.choose_kind <gridcoll.phoenix.broadcast.Broadcast.choose_kind>`."""
        return self.broadcast.choose_kind(nbytes)

    def timeout(self, nbytes: int = 0) -> float:
        """:meth:`Reduction.timeout <gridcoll.phoenix.reduction.Reduction.timeout>`."""
        return self.reduction.timeout(nbytes)

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
            self.prober.on_probe_result(event)
        elif isinstance(event, TimerExpired):
            self._on_timer(event.timer)
        elif isinstance(event, Start):
            self._on_start()
        elif isinstance(event, JoinRequested):
            self.state = transition(self.state, JoinRequested)
            self.membership.contact = event.contact
            self.send(event.contact, JoinRequest())
        elif isinstance(event, LeaveRequested):
            self.membership.on_leave(event.heir)
        elif isinstance(event, MigrateRequested):
            self.ownership.on_migrate(event)
        elif isinstance(event, BcastRequested):
            self.broadcast.on_bcast_requested(event)
        elif isinstance(event, ReduceRequested):
            self.reduction.on_reduce_requested(event)
        elif isinstance(event, PeerFailed):
            self.ownership.on_peer_failed(event.pid, event.received, event.delivered)
        elif isinstance(event, Remeasured):
            self.prober.on_remeasured(event.peer, event.rtt_s, event.bw_Bps)

    def _receive(self, src: int, m: Message) -> None:
        if self.state is State.JOINING and isinstance(m, JoinRefused):
            if not m.members:
                raise RemoteProtocolError(f"contact {src} has left and knows no member")
            self.membership.contact = self.rng.choice(sorted(m.members))
            self.send(self.membership.contact, JoinRequest())
            return
        if self.state is State.JOINING and not isinstance(m, Welcome):
            self.membership.early.append((src, m))  # gossip may overtake the Welcome
            return
        handler = {
            InfoRequest: self.prober.on_info_request,
            Info: self.prober.on_info,
            ChildUpdates: self.forest.on_child_updates,
            ParentUpdates: self.forest.on_parent_updates,
            Adopt: self.forest.on_adopt,
            Bcast: self.broadcast.on_bcast,
            Want: self.broadcast.on_want,
            Partial: self.reduction.on_partial,
            JoinRequest: self.membership.on_join_request,
            Welcome: self.membership.on_welcome,
            Handover: self.ownership.on_handover,
            Update: self.membership.on_update,
            Leaving: self.membership.on_leaving,
            LeaveAck: self.membership.on_leave_ack,
            Near: self.prober.on_near,
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
            self.ownership.learn_routes(m.entries)
            self.membership.ack_leaving(src, m.round)
        elif isinstance(m, InfoRequest):
            self.prober.on_info_request(src, m)
        elif isinstance(m, ChildUpdates):
            self.forest.redirect(src, m)
        elif isinstance(m, JoinRequest):  # members it knew left later: no cycle
            self.send(src, JoinRefused(frozenset(self.members - {self.pid})))

    def send(self, dst: int, m: Message) -> None:
        """Send ``m`` to ``dst``: a :class:`Send` action, counted per destination."""
        if dst == self.pid:
            raise LocalProtocolError(f"process {self.pid} sending {m!r} to itself")
        self.out.append(Send(dst, m, message_bytes(m)))
        self.sends_to[dst] = self.sends_to.get(dst, 0) + 1

    def others(self) -> list[int]:
        """The other members, in id order."""
        return sorted(self.members - {self.pid})

    # -- membership -------------------------------------------------------------------
    def _on_start(self) -> None:
        if self.founders is None:
            raise LocalProtocolError(f"process {self.pid} is not a founder; feed JoinRequested")
        if self.pid not in self.founders:
            raise LocalProtocolError(f"founder mapping does not name process {self.pid}")
        self.table = VNodeTable.founded(self.pid, self.founders)
        self.state = transition(self.state, Start)
        for pid in self.founders:
            self.membership.add_member(pid)

    # -- vnodes -------------------------------------------------------------------------
    def require_table(self) -> VNodeTable:
        """The vnode table; a process that has none yet (IDLE, JOINING) cannot act."""
        if self.table is None:
            raise LocalProtocolError(f"process {self.pid} has no vnode table yet")
        return self.table

    def _on_timer(self, timer: Hashable) -> None:
        if not isinstance(timer, tuple) or len(timer) != 2:
            raise LocalProtocolError(f"unknown timer {timer!r}")
        kind, op_id = timer
        if self.state in (State.LEFT,):
            return
        if kind == "reduce":
            r = self.reduction.reduces.get(op_id)
            if r is not None and not r.expired:
                if r.root in self.require_table().owned:
                    r.expired = True
                else:
                    self.reduction.flush_reduce(r)
        elif kind == "stall":
            self.broadcast.on_stall(op_id)
        elif kind == "lent":
            self.forest.end_loan(op_id)
        elif kind == "reduce-give-up":
            s = self.reduction.sums.get(op_id)
            if s is not None and not s.done and s.root in self.require_table().owned:
                self.reduction.finish(s, give_up=True)
        else:
            raise LocalProtocolError(f"unknown timer {timer!r}")
