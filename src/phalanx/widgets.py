"""Jupyter widgets: a live table of your jobs, of your Ray clusters, and a job's log tail.

```python
from phalanx.widgets import view_jobs, view_clusters, view_logs
view_jobs()          # status, queue position, estimated start, why pending, cancel and
                     # logs buttons; refreshes itself
view_clusters()      # Ray clusters with up, down and dashboard buttons
view_logs("ddp")     # the last lines of a job's log, kept current
```

Needs ``pip install 'phalanx[notebook]'`` (ipywidgets); ``import phalanx`` never loads
it. Each view refreshes from the API in a background thread (the kernel stays free) that
sets the widgets' values, and stops when the view is closed (``view.close()``, or the
widget closed in the notebook). ``view.refresh()`` refreshes at once.
"""

from __future__ import annotations

import html
import json
import threading
import time
from collections.abc import Callable
from typing import Any

try:
    import ipywidgets as w
except ImportError:  # pragma: no cover - the extra is missing
    raise ImportError("phalanx.widgets needs ipywidgets: pip install 'phalanx[notebook]'") \
        from None

from phalanx.display import in_notebook
from phalanx.errors import PhalanxError
from phalanx.ray.cluster import Cluster, RayCluster, get_cluster, list_clusters
from phalanx.sdk.client import Client
from phalanx.spec.status import JobRecord
from phalanx.spec.tables import amounts, position_text, starts_text, total_resources, why

REFRESH_SECONDS = 2.0
JOB_LIMIT = 50  # the newest jobs shown
LOG_LINES = 40


class LiveView:
    """A widget refreshed from the API by a background thread until closed."""

    def __init__(self, client: Client | None, interval: float, start: bool) -> None:
        self.client = client or Client()
        self.interval = interval
        self.error = w.HTML()  # the last refresh's failure, if any
        self.widget = w.VBox([self.error])
        self._stop = threading.Event()
        self._lock = threading.Lock()  # one refresh at a time (thread and clicks)
        self.thread: threading.Thread | None = None
        # The notebook closing the widget closes its comm: stop refreshing then too.
        self.widget.observe(self._closed, names="comm")
        if start:
            self.start()

    # -- to override
    def _refresh(self) -> None:
        raise NotImplementedError

    # -- life
    def refresh(self) -> None:
        """Read the API now and update the widgets; a failure shows in the view."""
        with self._lock:
            try:
                self._refresh()
                self.error.value = ""
            except PhalanxError as exc:
                self.show_error(exc)

    def show_error(self, exc: Exception) -> None:
        self.error.value = f'<span style="color:#b00">{html.escape(str(exc))}</span>'

    def start(self) -> None:
        if self.thread is not None and self.thread.is_alive():
            return
        self._stop.clear()
        self.thread = threading.Thread(target=self._run, name=f"phalanx-{type(self).__name__}",
                                       daemon=True)
        self.thread.start()

    def _run(self) -> None:
        while not self._stop.is_set():
            try:
                self.refresh()
            except Exception as exc:  # a thread that died would stop refreshing unseen
                self.show_error(exc)
            self._stop.wait(self.interval)

    def stop(self) -> None:
        """Stop refreshing (the widgets stay as they are)."""
        self._stop.set()
        thread = self.thread
        if thread is not None and thread is not threading.current_thread():
            thread.join(timeout=self.interval + 30)

    def close(self) -> None:
        """Stop refreshing and close the widgets."""
        self.stop()
        self.widget.close()

    def _closed(self, change: dict[str, Any]) -> None:
        if change.get("new") is None:
            self._stop.set()

    def _ipython_display_(self) -> None:
        from IPython.display import display

        display(self.widget)


def _button(description: str, on_click: Callable[[], None], style: str = "",
            width: str = "6.5em") -> w.Button:
    button = w.Button(description=description, button_style=style,
                      layout=w.Layout(width=width, flex="0 0 auto"))
    button.on_click(lambda _: on_click())
    return button


def _cell(text: str, width: str) -> w.HTML:
    return w.HTML(html.escape(text), layout=_column(width))


def _column(width: str) -> w.Layout:
    """A fixed column, or (width "*") the one that takes the room left."""
    if width == "*":
        return w.Layout(flex="1 1 0", min_width="8em", margin="0 0.6em 0 0")
    return w.Layout(width=width, flex="0 0 auto", margin="0 0.6em 0 0", overflow="hidden")


class LogTail(LiveView):
    """The last ``lines`` lines of a job's log (all pods, each line prefixed by its pod)."""

    def __init__(self, name: str, client: Client | None = None, *, lines: int = LOG_LINES,
                 interval: float = REFRESH_SECONDS, start: bool = True) -> None:
        self.name = name
        self.lines = lines
        self.title = w.HTML(f"<b>logs of {html.escape(name)}</b>")
        self.text = w.Textarea(layout=w.Layout(width="100%", height="20em"), disabled=True)
        super().__init__(client, interval, start=False)
        self.widget.children = (self.title, self.text, self.error)
        if start:
            self.start()

    def _refresh(self) -> None:
        self.text.value = "\n".join(self.client.logs(self.name, tail=self.lines))


class JobRow:
    """One job's row: cells and its cancel / logs buttons."""

    def __init__(self, view: JobsView, record: JobRecord) -> None:
        self.name = record.name
        self.cells = {key: _cell("", width) for key, width in JobsView.COLUMNS}
        self.cancel = _button("cancel", lambda: view.cancel(self.name), "danger", "5em")
        self.logs = _button("logs", lambda: view.show_logs(self.name), width="5em")
        self.widget = w.HBox([*self.cells.values(), self.cancel, self.logs])
        self.update(record)

    def update(self, record: JobRecord) -> None:
        position = position_text(record)  # "" unless queued with an estimate
        estimate = record.estimate
        values = {"name": record.name, "status": record.status.value, "queue": record.queue,
                  "pods": str(record.spec.pod_count),
                  "resources": amounts(total_resources(record.spec)),
                  "position": f"#{estimate.position}" if position and estimate else "-",
                  "starts": starts_text(record, time.time()),
                  "why": why(record)}
        for key, cell in self.cells.items():
            shown = html.escape(values[key])
            if cell.value != shown:
                cell.value = shown
        # The place in few characters; in full (ClusterQueue, cohort) on hovering.
        if self.cells["position"].tooltip != (position or None):
            self.cells["position"].tooltip = position or None
        self.cancel.disabled = record.status.terminal or record.cancel_requested


class JobsView(LiveView):
    """The newest jobs of a user (yours by default; ``user="*"``: every job you may see).
    A queued job shows its place in its ClusterQueue ("#2"; hovering says where, and its
    place in the cohort) and its estimated start ("~12m"; "?" while unknown; a trailing
    "*" marks a guess), as ``phalanx jobs`` does."""

    COLUMNS = (("name", "9em"), ("status", "5.5em"), ("queue", "5.5em"), ("pods", "3em"),
               ("resources", "6.5em"), ("position", "4.8em"), ("starts", "3.5em"),
               ("why", "*"))

    def __init__(self, client: Client | None = None, *, user: str | None = None,
                 queue: str | None = None, limit: int = JOB_LIMIT,
                 interval: float = REFRESH_SECONDS, start: bool = True) -> None:
        self.queue = queue
        self.limit = limit
        self.rows: dict[str, JobRow] = {}
        self.header = w.HBox([w.HTML(f"<b>{key}</b>", layout=_column(width))
                              for key, width in self.COLUMNS])
        self.table = w.VBox()
        self.logs: LogTail | None = None
        self.log_box = w.VBox()
        super().__init__(client, interval, start=False)
        self.user = self.client.whoami().user if user is None else (None if user == "*"
                                                                     else user)
        self.widget.children = (self.header, self.table, self.error, self.log_box)
        if start:
            self.start()

    def _refresh(self) -> None:
        records = self.client.list(queue=self.queue, user=self.user, limit=self.limit)
        for record in records:
            row = self.rows.get(record.name)
            if row is None:
                self.rows[record.name] = JobRow(self, record)
            else:
                row.update(record)
        shown = {r.name for r in records}
        for name in [n for n in self.rows if n not in shown]:
            self.rows.pop(name).widget.close()
        order = [self.rows[r.name].widget for r in records]
        if list(self.table.children) != order:
            self.table.children = order

    def cancel(self, name: str) -> None:
        """The cancel button: cancel the job, then show its new status."""
        try:
            self.client.cancel(name)
        except PhalanxError as exc:
            self.show_error(exc)
            return
        self.refresh()

    def show_logs(self, name: str) -> None:
        """The logs button: a live tail of that job's log under the table."""
        if self.logs is not None:
            self.logs.close()
        self.logs = LogTail(name, self.client, interval=self.interval)
        self.log_box.children = (self.logs.widget,)

    def stop(self) -> None:
        if self.logs is not None:
            self.logs.stop()
        super().stop()


class ClusterRow:
    def __init__(self, view: ClustersView, cluster: RayCluster) -> None:
        self.name = cluster.name
        self.cells = {key: _cell("", width) for key, width in ClustersView.COLUMNS}
        self.up = _button("up", lambda: view.up(self.name), "success")
        self.down = _button("down", lambda: view.down(self.name), "danger")
        self.dashboard = _button("dashboard", lambda: view.open_dashboard(self.name))
        self.widget = w.HBox([*self.cells.values(), self.up, self.down, self.dashboard])
        self.update(cluster)

    def update(self, cluster: RayCluster) -> None:
        values = {"name": cluster.name, "status": cluster.status.value, "queue": cluster.queue,
                  "workers": str(cluster.num_workers), "message": cluster.message}
        for key, cell in self.cells.items():
            shown = html.escape(values[key])
            if cell.value != shown:
                cell.value = shown
        live = cluster.status.value in ("queued", "starting", "ready")
        self.up.disabled = live
        self.down.disabled = not live
        self.dashboard.disabled = cluster.dashboard is None


class ClustersView(LiveView):
    """Your Ray clusters (the taken-down ones too, to bring up again), as CodeFlare's
    ``view_clusters``."""

    COLUMNS = (("name", "11em"), ("status", "6em"), ("queue", "6em"), ("workers", "4em"),
               ("message", "*"))

    def __init__(self, client: Client | None = None, *, queue: str | None = None,
                 interval: float = REFRESH_SECONDS, start: bool = True) -> None:
        self.queue = queue
        self.rows: dict[str, ClusterRow] = {}
        self.header = w.HBox([w.HTML(f"<b>{key}</b>", layout=_column(width))
                              for key, width in self.COLUMNS])
        self.table = w.VBox()
        self.link = w.HTML()  # the dashboard last opened, as a link too
        super().__init__(client, interval, start=False)
        self.widget.children = (self.header, self.table, self.error, self.link)
        if start:
            self.start()

    def _refresh(self) -> None:
        clusters = list_clusters(self.queue, all=True, client=self.client)
        newest: dict[str, RayCluster] = {}
        for cluster in clusters:
            newest.setdefault(cluster.name, cluster)
        for cluster in newest.values():
            row = self.rows.get(cluster.name)
            if row is None:
                self.rows[cluster.name] = ClusterRow(self, cluster)
            else:
                row.update(cluster)
        for name in [n for n in self.rows if n not in newest]:
            self.rows.pop(name).widget.close()
        order = [self.rows[name].widget for name in newest]
        if list(self.table.children) != order:
            self.table.children = order

    def _act(self, action: Callable[[Cluster], Any], name: str) -> None:
        try:
            action(get_cluster(name, self.client))
        except PhalanxError as exc:
            self.show_error(exc)
            return
        self.refresh()

    def up(self, name: str) -> None:
        """The up button: submit the cluster again (its finished job is replaced)."""
        def bring_up(cluster: Cluster) -> None:
            if self.client.get(name).status.terminal:
                self.client.delete_job(name)
            cluster.up()

        self._act(bring_up, name)

    def down(self, name: str) -> None:
        """The down button: take it down, without blocking the kernel for the pods' end."""
        self._act(lambda cluster: cluster.down(wait=False), name)

    def open_dashboard(self, name: str) -> None:
        """The dashboard button: open the Ray dashboard in a new browser tab."""
        def open_it(cluster: Cluster) -> None:
            uri = cluster.dashboard_uri()
            self.link.value = (f'<a href="{html.escape(uri)}" target="_blank">Ray dashboard '
                               f"of {html.escape(name)}: {html.escape(uri)}</a>")
            if in_notebook():
                from IPython.display import Javascript, display

                display(Javascript(f"window.open({json.dumps(uri)}, '_blank')"))

        self._act(open_it, name)


def view_jobs(client: Client | None = None, **options: Any) -> JobsView:
    """A live table of your jobs: a notebook shows it as a cell's last expression;
    ``close()`` it to stop."""
    return JobsView(client, **options)


def view_clusters(client: Client | None = None, **options: Any) -> ClustersView:
    """A live table of your Ray clusters; ``close()`` it to stop."""
    return ClustersView(client, **options)


def view_logs(name: str, client: Client | None = None, **options: Any) -> LogTail:
    """The live tail of a job's log; ``close()`` it to stop."""
    return LogTail(name, client, **options)


__all__ = ["ClustersView", "JobsView", "LogTail", "view_clusters", "view_jobs", "view_logs"]
