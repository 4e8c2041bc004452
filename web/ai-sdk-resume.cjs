// Start a turn on one agentstores-asgi replica with the AI SDK's DefaultChatTransport, drop
// the connection mid-answer (AbortSignal), resume it on another replica with
// reconnectToStream, and assemble both with readUIMessageStream.
//
// Input (stdin, JSON): {first, second, headers, chatId, userMessageId, text, dropAfter}
//   first, second: the replicas' base URLs (the app's routes below them)
//   dropAfter: abort once the assembled answer holds at least this many characters
// Output (the last stdout line, JSON): what the client saw; tests/web compares it with the
// stored transcript.
"use strict";

const { DefaultChatTransport, readUIMessageStream } = require("ai");

async function readStdin() {
  const chunks = [];
  for await (const chunk of process.stdin) chunks.push(chunk);
  return JSON.parse(Buffer.concat(chunks).toString("utf8"));
}

function textOf(message) {
  return message.parts
    .filter((part) => part.type === "text")
    .map((part) => part.text)
    .join("");
}

function summary(message) {
  if (!message) return null;
  return {
    id: message.id,
    role: message.role,
    text: textOf(message),
    partTypes: message.parts.map((part) => part.type),
    textParts: message.parts.filter((part) => part.type === "text").length,
  };
}

// Tee the chunk stream so the test also sees the raw parts the app sent.
function recording(stream, into) {
  return stream.pipeThrough(
    new TransformStream({
      transform(chunk, controller) {
        into.push(chunk.type);
        controller.enqueue(chunk);
      },
    }),
  );
}

async function main() {
  const input = await readStdin();
  const transport = (base) =>
    new DefaultChatTransport({ api: `${base}/chat`, headers: input.headers });
  const userMessage = {
    id: input.userMessageId,
    role: "user",
    parts: [{ type: "text", text: input.text }],
  };

  // 1. Start the turn on the first replica; abort the request mid-answer.
  const abort = new AbortController();
  const started = await transport(input.first).sendMessages({
    chatId: input.chatId,
    messages: [userMessage],
    abortSignal: abort.signal,
    trigger: "submit-message",
    messageId: undefined,
  });
  const firstChunks = [];
  let partial = null;
  let dropped = false;
  try {
    for await (const message of readUIMessageStream({ stream: recording(started, firstChunks) })) {
      partial = message;
      if (textOf(message).length >= input.dropAfter) {
        dropped = true;
        abort.abort();
        break;
      }
    }
  } catch (error) {
    if (!dropped) throw error;
  }
  if (!dropped) throw new Error("the answer finished before the client could drop it");

  // 2. Resume on the second replica: the in-flight answer from its start.
  const resumed = await transport(input.second).reconnectToStream({ chatId: input.chatId });
  if (resumed === null) throw new Error("reconnectToStream: 204, no turn in flight");
  const secondChunks = [];
  let final = null;
  for await (const message of readUIMessageStream({ stream: recording(resumed, secondChunks) })) {
    final = message;
  }

  // 3. After the turn: nothing in flight, so a resume is a 204 (null).
  const after = await transport(input.first).reconnectToStream({ chatId: input.chatId });

  console.log(
    JSON.stringify({
      partial: summary(partial),
      final: summary(final),
      firstChunks,
      secondChunks,
      idleAfter: after === null,
    }),
  );
}

main().catch((error) => {
  console.error(error && error.stack ? error.stack : String(error));
  process.exit(1);
});
