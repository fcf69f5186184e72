// Phalanx dashboard: the log view (follow over SSE, search, download) and sorting the
// jobs table's page by a column. Live page fragments are htmx's (sse extension).
"use strict";

function followLog(section) {
  const job = section.dataset.job;
  const select = document.getElementById("log-pod");
  const search = document.getElementById("log-search");
  const lines = document.getElementById("log-lines");
  const state = document.getElementById("log-state");
  const download = document.getElementById("log-download");
  let source = null;

  function matches(text) {
    const wanted = search.value.trim().toLowerCase();
    return !wanted || text.toLowerCase().includes(wanted);
  }
  function add(text) {
    const stick = lines.scrollTop + lines.clientHeight >= lines.scrollHeight - 4;
    for (const line of text.split("\n")) {
      const div = document.createElement("div");
      div.textContent = line;
      if (!matches(line)) div.classList.add("hide");
      lines.appendChild(div);
    }
    if (stick) lines.scrollTop = lines.scrollHeight;
  }
  function start() {
    if (source) source.close();
    lines.textContent = "";
    const pod = select ? select.value : "";
    const query = pod ? "?pod=" + encodeURIComponent(pod) : "";
    download.href = "/ui/jobs/" + encodeURIComponent(job) + "/log.txt" + query;
    if (!pod) { state.textContent = "no pod yet"; return; }
    state.textContent = "following";
    source = new EventSource("/ui/jobs/" + encodeURIComponent(job) + "/log" + query);
    source.addEventListener("line", (event) => add(event.data));
    source.addEventListener("end", () => { state.textContent = "the job has ended"; source.close(); });
    source.onerror = () => {
      // A refused follow (too many followers) or a lost connection: say so and stop,
      // rather than reconnecting and printing the log twice.
      if (state.textContent === "following") state.textContent = "not following (reload to retry)";
      source.close();
    };
  }
  search.addEventListener("input", () => {
    for (const div of lines.children) div.classList.toggle("hide", !matches(div.textContent));
  });
  if (select) select.addEventListener("change", start);
  start();
}

function sortTable(button) {
  const table = button.closest("table");
  const column = Number(button.dataset.sort);
  const numeric = button.hasAttribute("data-numeric");
  const ascending = button.getAttribute("aria-sort") !== "ascending";
  for (const other of table.querySelectorAll("th button")) other.removeAttribute("aria-sort");
  button.setAttribute("aria-sort", ascending ? "ascending" : "descending");
  const body = table.tBodies[0];
  const rows = Array.from(body.rows);
  const key = (row) => row.cells[column] ? row.cells[column].textContent.trim() : "";
  rows.sort((a, b) => {
    const x = key(a), y = key(b);
    const order = numeric ? Number(x) - Number(y) : x.localeCompare(y);
    return ascending ? order : -order;
  });
  for (const row of rows) body.appendChild(row);
}

document.addEventListener("click", (event) => {
  const button = event.target.closest("th button[data-sort]");
  if (button) sortTable(button);
});

document.addEventListener("DOMContentLoaded", () => {
  const section = document.querySelector("section.log[data-job]");
  if (section) followLog(section);
});
