"""The scripts of the example's demo pages: what a button does without
leaving its page (start long requests at once, show a task's progress)."""

from django.utils.safestring import mark_safe

#: Starts one long print job per printer (without waiting for them), so that
#: the next request finds none free and gets the 503 page after its 2 s.
OCCUPY_SCRIPT = mark_safe(
    """
document.getElementById("occupy").addEventListener("click", (event) => {
  const count = Number(event.target.dataset.printers);
  const seconds = event.target.dataset.seconds;
  // (distinct URLs: a browser sends identical GETs one after the other)
  for (let i = 1; i <= count; i++) fetch(`/print/?seconds=${seconds}&job=${i}`);
  document.getElementById("occupied").innerHTML =
    "Every printer is busy now: <a id='print-now' href='/print/'>print</a> to see the 503 page.";
});
"""
)

#: Starts a long report (without waiting for it) and shows the link to the
#: semaphore's page in the admin, where its slot is listed while it runs.
LONG_REPORT_SCRIPT = mark_safe(
    """
let reports = 0;
document.getElementById("long-report").addEventListener("click", (event) => {
  const seconds = event.target.dataset.seconds;
  const state = document.getElementById("long-report-state");
  reports += 1;
  state.textContent = `building (${seconds} s)`;
  document.getElementById("long-report-started").hidden = false;
  // (distinct URLs: a browser sends identical GETs one after the other)
  fetch(`/report/?seconds=${seconds}&report=${Date.now()}-${reports}`).then((response) => {
    state.textContent = response.ok ? "built: its slot is free again"
      : `refused (${response.status}): both slots were taken`;
  });
});
"""
)

#: Runs an import, and half a second later, while the first holds the lock
#: (``?seconds=``), a second one; then shows what each answered.
TWO_IMPORTS_SCRIPT = mark_safe(
    """
document.getElementById("two-imports").addEventListener("click", async (event) => {
  const seconds = event.target.dataset.seconds;
  const results = document.getElementById("two-imports-results");
  results.textContent = "";
  const runImport = async (job, which) => {
    const response = await fetch(`/import/?seconds=${seconds}&job=${job}-${Date.now()}`);
    const page = new DOMParser().parseFromString(await response.text(), "text/html");
    const said = page.getElementById("imported") || page.querySelector("h1");
    const item = document.createElement("li");
    item.className = "import-result";
    item.dataset.status = response.status;
    item.textContent = `${which}: ${said.textContent} (${response.status})`;
    results.append(item);
  };
  const first = runImport(1, "The first");
  await new Promise((resolve) => setTimeout(resolve, 500));
  await Promise.all([first, runImport(2, "The second, half a second later")]);
});
"""
)

#: Fetches as ann, and half a second later as bob, while ann's fetch holds its
#: proxy (``?seconds=``), then shows what each got, the bindings as the fetch
#: that ended last read them, and the links to fetch again.
TOGETHER_SCRIPT = mark_safe(
    """
document.getElementById("together").addEventListener("click", async (event) => {
  const seconds = event.target.dataset.seconds;
  const results = document.getElementById("together-results");
  results.textContent = "";
  let bindings = null;  // #bindings of the last answer that has one
  const fetchAs = async (visitor) => {
    const response = await fetch(`/fetch/?visitor=${visitor}&seconds=${seconds}`);
    const page = new DOMParser().parseFromString(await response.text(), "text/html");
    const fetched = page.getElementById("fetched") || page.querySelector("h1");
    bindings = page.getElementById("bindings") || bindings;
    const item = document.createElement("li");
    item.className = "together-result";
    item.textContent = fetched.textContent;
    results.append(item);
  };
  const ann = fetchAs("ann");
  await new Promise((resolve) => setTimeout(resolve, 500));
  await Promise.all([ann, fetchAs("bob")]);
  if (bindings) document.getElementById("bindings").replaceChildren(...bindings.childNodes);
  const again = document.createElement("li");
  again.id = "fetch-alone";
  again.innerHTML = "Now fetch alone as <a href='?visitor=ann'>ann</a> or " +
    "<a href='?visitor=bob'>bob</a>: each gets its own proxy again.";
  results.append(again);
});
"""
)

#: Asks for the task's state (``data-json``, every half second) and shows it
#: in place until the task ends: its status, the progress bar, "N of M", the
#: result.
TASK_SCRIPT = mark_safe(
    """
(() => {
  const task = document.getElementById("task");
  const show = (state) => {
    document.getElementById("status").textContent = state.status;
    const bar = document.getElementById("progress");
    if (state.total) {
      bar.max = state.total;
      bar.value = state.current;
    } else {
      bar.removeAttribute("value");  // (indeterminate)
    }
    document.getElementById("count").textContent = state.progress;
    document.getElementById("result").textContent = state.result;
    document.getElementById("queued").hidden = state.status !== "queued";
    task.dataset.ended = state.ended;
  };
  const poll = async () => {
    let response;
    try {
      response = await fetch(task.dataset.json, {cache: "no-store"});
    } catch (error) {
      setTimeout(poll, 2000);  // (the server restarts, say)
      return;
    }
    if (response.status === 404) {
      show({status: "gone", total: 0, progress: "", result: "", ended: true});
      return;
    }
    if (response.ok) show(await response.json());
    if (task.dataset.ended !== "true") setTimeout(poll, response.ok ? 500 : 2000);
  };
  if (task.dataset.ended !== "true") setTimeout(poll, 500);
})();
"""
)
