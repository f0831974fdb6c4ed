"""The ledger: what runs and fanouts left behind, in the user's state dir.

- :mod:`executor.ledger.records`: a run's record, its status and its id;
- :mod:`executor.ledger.store`: the per-repository ledger of run records (written
  atomically, read back, looked up by id, marked applied or discarded, deleted);
- :mod:`executor.ledger.index`: the SQLite index beside the record files (the files stay
  the truth; rebuilt from them when missing, unusable or older), written after each record;
- :mod:`executor.ledger.listing`: every listing, from the index, O(what it shows);
- :mod:`executor.ledger.journal`: a run's events, appended as they happen;
- :mod:`executor.ledger.fanouts`: a fanout's own record beside its children's;
- :mod:`executor.ledger.siblings`: the children of a fanout an apply of one supersedes;
- :mod:`executor.ledger.lineage`: a continued run's conversation, the run it supersedes;
- :mod:`executor.ledger.crashes`: runs whose process died, finalised by ``corral gc``;
- :mod:`executor.ledger.prune`: ``corral gc --older-than``, what finished runs left;
- :mod:`executor.ledger.imports`: a run recorded on a cluster node, checked and landed here.

Nothing here runs an agent: the run machinery (:mod:`executor.run`) writes these
records, and every front door reads them through :mod:`executor.api`.
"""

from executor.ledger.crashes import CrashedRun, finalize_crashed_runs
from executor.ledger.fanouts import (
    FanoutChild,
    FanoutRecord,
    FanoutStatus,
    fanout_status,
    finalize_crashed_fanouts,
    find_fanout,
    new_fanout_id,
    scan_fanouts,
    write_fanout,
)
from executor.ledger.journal import JOURNAL, Journal, read_journal
from executor.ledger.lineage import UNANSWERED, conversation, supersede
from executor.ledger.listing import (
    Entry,
    Filters,
    Page,
    RunSummary,
    broken_records,
    iter_entries,
    page,
)
from executor.ledger.prune import BadDuration, Pruned, parse_duration, prune_finished
from executor.ledger.rebuild import rebuild
from executor.ledger.records import (
    ID_PREFIX,
    RUN_STATES,
    RecordError,
    RunRecord,
    RunState,
    RunStatus,
    check_id_prefix,
    elapsed,
    new_run_id,
    now_iso,
    run_status,
    running_owner,
)
from executor.ledger.store import (
    delete_run,
    discard_run,
    finalize_crashed,
    find_run,
    ledger_dir,
    list_runs,
    load_patch,
    load_transcript,
    rewrite_record,
    scan_runs,
    set_run_check,
    set_run_state,
    write_run,
)

__all__ = [
    "ID_PREFIX",
    "JOURNAL",
    "RUN_STATES",
    "UNANSWERED",
    "BadDuration",
    "CrashedRun",
    "Entry",
    "FanoutChild",
    "FanoutRecord",
    "FanoutStatus",
    "Filters",
    "Journal",
    "Page",
    "Pruned",
    "RecordError",
    "RunRecord",
    "RunState",
    "RunStatus",
    "RunSummary",
    "broken_records",
    "check_id_prefix",
    "conversation",
    "delete_run",
    "discard_run",
    "elapsed",
    "fanout_status",
    "finalize_crashed",
    "finalize_crashed_fanouts",
    "finalize_crashed_runs",
    "find_fanout",
    "find_run",
    "iter_entries",
    "ledger_dir",
    "list_runs",
    "load_patch",
    "load_transcript",
    "new_fanout_id",
    "new_run_id",
    "now_iso",
    "page",
    "parse_duration",
    "prune_finished",
    "read_journal",
    "rebuild",
    "rewrite_record",
    "run_status",
    "running_owner",
    "scan_fanouts",
    "scan_runs",
    "set_run_check",
    "set_run_state",
    "supersede",
    "write_fanout",
    "write_run",
]
