// Roost's STOMP test page: connects to /ws on the origin that served it, subscribes to
// ?subscribe= with client-individual acks, and sends what the form holds. The state a
// test reads is on window.roostTest.
"use strict";

(() => {
  const params = new URLSearchParams(location.search);
  const state = { connected: false, error: null, sent: 0, received: [] };
  window.roostTest = state;
  const status = document.getElementById("status");
  const show = (text) => { status.textContent = text; };

  if (typeof StompJs === "undefined") {
    state.error = "stomp.umd.min.js did not load";
    show(state.error);
    return;
  }
  const scheme = location.protocol === "https:" ? "wss:" : "ws:";
  const headers = {
    login: params.get("login") || "guest",
    passcode: params.get("passcode") || "guest",
  };
  if (params.get("host")) headers.host = params.get("host");
  const client = new StompJs.Client({
    brokerURL: `${scheme}//${location.host}/ws`,
    connectHeaders: headers,
    reconnectDelay: 0,
  });
  const form = document.getElementById("send-form");
  document.getElementById("destination").value = params.get("send") || "";

  client.onConnect = () => {
    const destination = params.get("subscribe");
    if (destination) {
      document.getElementById("subscribed").textContent = destination;
      client.subscribe(destination, (message) => {
        state.received.push({
          body: message.body,
          type: message.headers["content-type"] || null,
          destination: message.headers.destination,
        });
        const item = document.createElement("li");
        item.textContent = message.body;
        document.getElementById("received").append(item);
        message.ack();
      }, { ack: "client-individual", "prefetch-count": "10" });
    }
    state.connected = true;
    document.getElementById("send").disabled = false;
    show("connected");
  };
  client.onStompError = (frame) => {
    state.error = frame.headers.message;
    show(`error: ${frame.headers.message}`);
  };
  client.onWebSocketClose = () => {
    state.connected = false;
    document.getElementById("send").disabled = true;
    if (!state.error) show("closed");
  };
  form.addEventListener("submit", (event) => {
    event.preventDefault();
    client.publish({
      destination: form.destination.value,
      body: form.body.value,
      headers: { "content-type": form["content-type"].value, persistent: "true" },
    });
    state.sent += 1;
  });
  window.roostTestClient = client;
  show("connecting");
  client.activate();
})();
