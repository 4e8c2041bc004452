// useChat's own logic without React: the AI SDK's AbstractChat (what useChat and the Vue
// and Svelte Chat classes wrap) with a plain in-memory ChatState.
//
// Tab 1 sends a message through one replica and closes mid-answer (chat.stop()). Tab 2 is
// a page load on another replica: its initial messages are the stored transcript
// (GET conversations/{id}/messages?format=ui), then resumeStream(), what
// `useChat({resume: true})` does on mount. Tab 2 must end with one assistant message, the
// whole answer (no duplicated message, no lost text).
//
// Input (stdin, JSON): {first, second, headers, chatId, text, dropAfter}
// Output (the last stdout line, JSON): both chats' messages and what happened.
"use strict";

const { AbstractChat, DefaultChatTransport } = require("ai");

class MemoryChatState {
  constructor(messages = []) {
    this.messages = messages;
    this.status = "ready";
    this.error = undefined;
  }
  pushMessage(message) {
    this.messages = this.messages.concat(message);
  }
  popMessage() {
    this.messages = this.messages.slice(0, -1);
  }
  replaceMessage(index, message) {
    this.messages = [...this.messages.slice(0, index), message, ...this.messages.slice(index + 1)];
  }
  snapshot(thing) {
    return structuredClone(thing);
  }
}

class NodeChat extends AbstractChat {
  constructor({ messages, ...init }) {
    super({ ...init, state: new MemoryChatState(messages) });
  }
}

async function readStdin() {
  const chunks = [];
  for await (const chunk of process.stdin) chunks.push(chunk);
  return JSON.parse(Buffer.concat(chunks).toString("utf8"));
}

const textOf = (message) =>
  message.parts.filter((part) => part.type === "text").map((part) => part.text).join("");

const summary = (messages) =>
  messages.map((m) => ({ id: m.id, role: m.role, text: textOf(m), parts: m.parts.length }));

async function main() {
  const input = await readStdin();
  const transport = (base) =>
    new DefaultChatTransport({ api: `${base}/chat`, headers: input.headers });
  const errors = [];
  const data = [];

  // Tab 1: send, and close once the answer has started (stop() aborts the request).
  let dropped = null;
  const tab1 = new NodeChat({
    id: input.chatId,
    transport: transport(input.first),
    onError: (error) => errors.push(`tab1: ${error.message}`),
  });
  const sending = tab1.sendMessage({ text: input.text });
  for (let i = 0; i < 3000 && dropped === null; i++) {
    const last = tab1.messages[tab1.messages.length - 1];
    if (last && last.role === "assistant" && textOf(last).length >= input.dropAfter) {
      dropped = textOf(last);
      await tab1.stop();
    } else {
      await new Promise((resolve) => setTimeout(resolve, 10));
    }
  }
  await sending;
  if (dropped === null) throw new Error("tab 1 never saw the answer start");

  // Tab 2: a page load on the other replica, then resume.
  const path = `${input.second}/conversations/${encodeURIComponent(input.chatId)}/messages?format=ui`;
  const response = await fetch(path, { headers: input.headers });
  if (!response.ok) throw new Error(`${path}: ${response.status} ${await response.text()}`);
  const body = await response.json();
  const initial = Array.isArray(body) ? body : body.messages;
  const tab2 = new NodeChat({
    id: input.chatId,
    messages: initial,
    transport: transport(input.second),
    onError: (error) => errors.push(`tab2: ${error.message}`),
    onData: (part) => data.push(part.type),
  });
  await tab2.resumeStream();

  console.log(
    JSON.stringify({
      dropped,
      tab1: summary(tab1.messages),
      initial: summary(initial),
      tab2: summary(tab2.messages),
      tab2Status: tab2.status,
      errors,
      data,
    }),
  );
}

main().catch((error) => {
  console.error(error && error.stack ? error.stack : String(error));
  process.exit(1);
});
