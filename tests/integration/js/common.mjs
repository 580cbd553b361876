// Shared helpers of the @azure/data-tables black-box tests.
//
// The cluster comes from the environment (set by test_sdk_js.py):
//   RT_TABLE_ENDPOINT   http://127.0.0.1:PORT/devstoreaccount1
//   RT_ACCOUNT, RT_KEY  the account name and its base64 key
//   RT_CONNECTION_STRING
//     DefaultEndpointsProtocol=http;AccountName=..;AccountKey=..;TableEndpoint=..
import assert from "node:assert/strict";
import { randomBytes } from "node:crypto";

import {
  AzureNamedKeyCredential,
  TableClient,
  TableServiceClient,
} from "@azure/data-tables";

function need(name) {
  const v = process.env[name];
  if (!v) {
    throw new Error(`${name} is not set (run through test_sdk_js.py)`);
  }
  return v;
}

export const endpoint = need("RT_TABLE_ENDPOINT");
export const account = need("RT_ACCOUNT");
export const accountKey = need("RT_KEY");
export const connectionString = need("RT_CONNECTION_STRING");
export const credential = new AzureNamedKeyCredential(account, accountKey);

// http, not https: the SDK refuses plain http without this.
export const clientOptions = {
  allowInsecureConnection: true,
  retryOptions: { maxRetries: 1, retryDelayInMs: 200 },
};

// A fresh valid table name: letters and digits, unique across test files
// (node --test runs files in separate processes).
const runTag = randomBytes(3).toString("hex");
let seq = 0;
export function tableName(prefix = "js") {
  seq += 1;
  return `${prefix}${runTag}n${seq}`;
}

export function serviceClient() {
  return new TableServiceClient(endpoint, credential, clientOptions);
}

export function tableClient(name) {
  return new TableClient(endpoint, name, credential, clientOptions);
}

// Creates a new table and returns its TableClient.
export async function newTable(prefix = "js") {
  const name = tableName(prefix);
  const client = tableClient(name);
  await client.createTable();
  return client;
}

// The Azure error code of a RestError: the decoded code, the
// x-ms-error-code header, or the odata.error body.
export function errCode(e) {
  return (
    e?.response?.headers?.get?.("x-ms-error-code") ??
    e?.details?.odataError?.code ??
    e?.response?.parsedBody?.odataError?.code ??
    e?.code
  );
}

// Awaits @promise, which must reject with HTTP @status and (when given) an
// error code in @codes (a string or an array). Returns the error.
export async function expectError(promise, status, codes) {
  let err;
  try {
    await promise;
  } catch (e) {
    err = e;
  }
  assert.ok(err, `expected HTTP ${status} ${codes ?? ""}, got success`);
  const code = errCode(err);
  assert.equal(
    err.statusCode,
    status,
    `expected ${status} ${codes ?? ""}, got ${err.statusCode} ${code}: ${err.message}`,
  );
  if (codes !== undefined) {
    const list = Array.isArray(codes) ? codes : [codes];
    assert.ok(
      list.includes(code),
      `expected code in ${list}, got ${code}: ${err.message}`,
    );
  }
  return err;
}

// Collects an async iterator into an array.
export async function all(iter) {
  const out = [];
  for await (const x of iter) {
    out.push(x);
  }
  return out;
}

export function keysOf(entities) {
  return entities.map((e) => [e.partitionKey, e.rowKey]);
}

// User properties only (no keys, etag, timestamp, odata.metadata).
export function userProps(e) {
  const out = {};
  for (const [k, v] of Object.entries(e)) {
    if (!["partitionKey", "rowKey", "etag", "timestamp", "odata.metadata"].includes(k)) {
      out[k] = v;
    }
  }
  return out;
}
