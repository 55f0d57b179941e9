// meshlab dashboard: the lab guide panel beside the topology graph, for a lab started with
// `meshlab lab start` (GET /v1/guide; POST /v1/guide/check, /next and /solve). Hidden when
// the lab has no guide.
"use strict";

const guideState = { busy: false };

// loadGuide shows the guide's current step, or hides the panel when there is none.
async function loadGuide() {
  const r = await api("GET", "/v1/guide");
  if (!r.ok || !r.data || typeof r.data !== "object") { $("guide").hidden = true; return; }
  drawGuide(r.data);
}

function drawGuide(g) {
  const key = `${g.lab}|${g.step}`;
  if (key !== guideState.key) { // a new step: the last step's results no longer apply
    guideState.key = key;
    $("guide-results").replaceChildren();
    $("guide-msg").textContent = "";
  }
  $("guide-title").textContent = g.title || g.lab;
  $("guide-intro").replaceChildren(renderMarkdown(g.introduction));
  $("guide-step").textContent = `Step ${g.step} of ${g.steps}: ${g.stepName}`;
  $("guide-instructions").replaceChildren(renderMarkdown(g.instructions));
  $("guide-error").textContent = g.error ? "The step's setup failed: " + g.error : "";
  drawTasks(g.tasks);
  $("guide-next").disabled = guideState.busy || g.step >= g.steps;
  drawDone(g);
  $("guide").hidden = false;
}

// drawTasks shows the commands the step asks for, each with the YAML it reads on stdin.
function drawTasks(tasks) {
  const items = (tasks || []).map((t) => h("li", { class: "task" },
    h("pre", { class: "mono cmd" }, t.command + (t.stdin ? " <<'EOF'" : "")),
    t.stdin ? h("pre", { class: "mono stdin" }, t.stdin.replace(/\n?$/, "\n") + "EOF") : ""));
  $("guide-tasks").replaceChildren(...items);
  $("guide-tasks-title").hidden = items.length === 0;
}

// drawDone says, once the last step's check passed, that the lab is finished and how to
// stop it, as `meshlab lab check` does in the terminal.
function drawDone(g) {
  const done = $("guide-done");
  if (!g.done) { done.hidden = true; done.replaceChildren(); return; }
  const name = state.labName || g.lab;
  done.replaceChildren(
    h("b", {}, `Lab ${g.lab} done: ${g.passed} of ${g.steps} steps passed.`),
    h("div", {}, "Stop it with Ctrl-C where ", h("code", {}, "meshlab lab start"), " runs, or: ", h("code", {}, `sudo meshlab down --name ${name}`)));
  done.hidden = false;
}

// drawChecks lists each check of a check or solve: PASS or FAIL, what it saw, what it
// wanted and, when it failed, a hint.
function drawChecks(c) {
  const items = [];
  if (c.error) items.push(h("li", { class: "check fail" }, h("b", { class: "bad" }, "FAIL"), " ", c.error));
  for (const x of c.results || []) {
    items.push(h("li", { class: "check " + (x.passed ? "pass" : "fail"), "data-check": x.check },
      h("b", { class: x.passed ? "ok" : "bad" }, x.passed ? "PASS" : "FAIL"), " ", h("span", { class: "mono" }, x.check),
      h("div", {}, "saw ", h("code", {}, x.saw)),
      h("div", {}, "want ", h("code", {}, x.want)),
      !x.passed && x.hint ? h("div", { class: "hint" }, "hint: ", x.hint) : ""));
  }
  $("guide-results").replaceChildren(...items);
  $("guide-msg").textContent = c.passed ? `Step ${c.step} passed.` + (c.done ? " The lab is done." : "") : `Step ${c.step} is not done yet.`;
  $("guide-msg").className = "msg " + (c.passed ? "ok" : "bad");
}

const GUIDE_DOING = { check: "checking…", solve: "applying the solution…", next: "moving on…" };

async function guideAction(verb) {
  if (guideState.busy) return;
  guideState.busy = true;
  for (const b of ["guide-check", "guide-solve", "guide-next"]) $(b).disabled = true;
  $("guide-msg").className = "msg";
  $("guide-msg").textContent = GUIDE_DOING[verb];
  try {
    const r = await api("POST", "/v1/guide/" + verb, {});
    if (!r.ok) {
      $("guide-msg").className = "msg error";
      $("guide-msg").textContent = "error: " + (r.data && r.data.error ? r.data.error : r.data);
    } else if (verb === "next") drawGuide(r.data);
    else drawChecks(r.data);
  } finally {
    guideState.busy = false;
    $("guide-check").disabled = $("guide-solve").disabled = false;
    await loadGuide(); // the step count decides whether Next is enabled
  }
}

window.addEventListener("DOMContentLoaded", () => {
  for (const verb of ["check", "solve", "next"]) $("guide-" + verb).addEventListener("click", () => guideAction(verb));
  loadGuide();
  // The guide can also move from the terminal (meshlab lab next): follow it while shown.
  setInterval(() => { if (state.view === "topology" && !guideState.busy && !$("guide").hidden) loadGuide(); }, 3000);
});
