// Sophia portal: live updates over Server-Sent Events. No framework: the server renders every page; this
// script only re-fetches the page's live region when an event it names arrives (no reload, focus kept).
(function () {
  "use strict"
  var region = document.getElementById("live")
  var state = document.getElementById("live-state")
  if (!region || !window.EventSource) return
  var wanted = (region.getAttribute("data-live") || "").split(/\s+/).filter(Boolean)
  var pending = null
  var inFlight = false
  var again = false

  function refresh() {
    if (inFlight) { again = true; return }
    inFlight = true
    fetch(location.pathname + location.search, { headers: { "x-portal-live": "1" }, credentials: "same-origin" })
      .then(function (r) { return r.ok ? r.text() : Promise.reject(r.status) })
      .then(function (text) {
        // keep focus on the control that had it (same id or same form action) when it survives the swap
        var active = document.activeElement
        var key = active && region.contains(active) ? (active.id || (active.form && active.form.getAttribute("action"))) : null
        region.innerHTML = text
        if (key) {
          var again1 = document.getElementById(key) || region.querySelector('form[action="' + key + '"] button')
          if (again1) again1.focus()
        }
        region.dispatchEvent(new CustomEvent("portal:refreshed", { bubbles: true }))
      })
      .catch(function () { /* the next event retries */ })
      .then(function () {
        inFlight = false
        if (again) { again = false; refresh() }
      })
  }
  function schedule() {
    if (pending) return
    pending = setTimeout(function () { pending = null; refresh() }, 100)
  }

  var opened = false
  var source = new EventSource("/portal/events")
  source.addEventListener("ready", function () {
    if (state) { state.textContent = "live"; state.setAttribute("data-state", "live") }
    // a reconnect may have missed events: catch up once
    if (opened) schedule()
    opened = true
  })
  source.onerror = function () {
    if (state) { state.textContent = "reconnecting"; state.setAttribute("data-state", "down") }
  }
  wanted.forEach(function (name) { source.addEventListener(name, schedule) })
})()
