// Transactions (submitTransaction, TableTransaction), SAS (generateTableSas,
// generateAccountSas with AzureSASCredential), access policies, service
// properties and statistics through @azure/data-tables.
import assert from "node:assert/strict";
import { before, describe, it } from "node:test";

import {
  AzureSASCredential,
  TableClient,
  TableServiceClient,
  TableTransaction,
  generateAccountSas,
  generateTableSas,
} from "@azure/data-tables";

import {
  all,
  clientOptions,
  credential,
  endpoint,
  expectError,
  keysOf,
  newTable,
  serviceClient,
  userProps,
} from "./common.mjs";

describe("transactions", () => {
  let t;
  before(async () => {
    t = await newTable("batch");
  });

  it("submitTransaction of creates: 202, one sub-response per op with an etag", async () => {
    const actions = [0, 1, 2].map((i) => ["create", { partitionKey: "b1", rowKey: `r${i}`, v: i }]);
    const res = await t.submitTransaction(actions);
    assert.equal(res.status, 202);
    assert.equal(res.subResponses.length, 3);
    for (const s of res.subResponses) {
      assert.ok(s.status >= 200 && s.status < 300, JSON.stringify(s));
      assert.match(s.etag ?? "", /^W\/"datetime'/);
    }
    const e = await t.getEntity("b1", "r1");
    assert.equal(res.getResponseForEntity("r1")?.etag?.trim(), e.etag);
  });

  it("mixed update / upsert / delete in one transaction", async () => {
    for (const rk of ["u", "m", "d"]) {
      await t.createEntity({ partitionKey: "b2", rowKey: rk, a: 1, z: 0 });
    }
    await t.submitTransaction([
      ["update", { partitionKey: "b2", rowKey: "u", a: 2 }, "Replace"],
      ["upsert", { partitionKey: "b2", rowKey: "m", b: 3 }, "Merge"],
      ["upsert", { partitionKey: "b2", rowKey: "n", c: 4 }, "Replace"],
      ["delete", { partitionKey: "b2", rowKey: "d" }],
      ["create", { partitionKey: "b2", rowKey: "c" }],
    ]);
    const got = Object.fromEntries(
      (await all(t.listEntities({ queryOptions: { filter: "PartitionKey eq 'b2'" } }))).map((e) => [
        e.rowKey,
        userProps(e),
      ]),
    );
    assert.deepEqual(got, { c: {}, m: { a: 1, z: 0, b: 3 }, n: { c: 4 }, u: { a: 2 } });
  });

  it("TableTransaction helper builds the same transaction", async () => {
    const tx = new TableTransaction();
    tx.createEntity({ partitionKey: "b3", rowKey: "1" });
    tx.createEntity({ partitionKey: "b3", rowKey: "2" });
    tx.upsertEntity({ partitionKey: "b3", rowKey: "3", v: true }, "Merge");
    const res = await t.submitTransaction(tx.actions);
    assert.equal(res.subResponses.length, 3);
    const keys = keysOf(await all(t.listEntities({ queryOptions: { filter: "PartitionKey eq 'b3'" } })));
    assert.deepEqual(keys, [
      ["b3", "1"],
      ["b3", "2"],
      ["b3", "3"],
    ]);
  });

  it("a failing operation fails the transaction atomically (409 EntityAlreadyExists)", async () => {
    await t.createEntity({ partitionKey: "b4", rowKey: "x" });
    const err = await expectError(
      t.submitTransaction([
        ["create", { partitionKey: "b4", rowKey: "1" }],
        ["create", { partitionKey: "b4", rowKey: "x" }],
      ]),
      409,
      "EntityAlreadyExists",
    );
    assert.match(err.message, /^1:/, err.message);
    const keys = keysOf(await all(t.listEntities({ queryOptions: { filter: "PartitionKey eq 'b4'" } })));
    assert.deepEqual(keys, [["b4", "x"]]);
  });

  it("update of a missing entity fails the transaction with 404", async () => {
    await expectError(
      t.submitTransaction([
        ["upsert", { partitionKey: "b5", rowKey: "1" }],
        ["update", { partitionKey: "b5", rowKey: "nope", a: 1 }],
      ]),
      404,
      ["ResourceNotFound", "EntityNotFound"],
    );
    const got = await all(t.listEntities({ queryOptions: { filter: "PartitionKey eq 'b5'" } }));
    assert.equal(got.length, 0);
  });

  it("keys with quotes and non-ASCII in a transaction", async () => {
    const keys = ["o'k", "a b", "ü日", "(x)"];
    await t.submitTransaction(keys.map((k) => ["create", { partitionKey: "b'6", rowKey: k, v: 1 }]));
    for (const k of keys) {
      assert.equal((await t.getEntity("b'6", k)).v, 1);
    }
  });

  it("100 operations in one transaction", async () => {
    const actions = Array.from({ length: 100 }, (_, i) => ["create", { partitionKey: "b7", rowKey: `${i}`.padStart(3, "0") }]);
    const res = await t.submitTransaction(actions);
    assert.equal(res.subResponses.length, 100);
  });
});

describe("SAS and access policies", () => {
  let t;
  before(async () => {
    t = await newTable("sas");
    await t.createEntity({ partitionKey: "p", rowKey: "r", v: 1 });
  });

  function sasClient(token) {
    return new TableClient(endpoint, t.tableName, new AzureSASCredential(token), clientOptions);
  }

  it("generateTableSas (read): get and list through AzureSASCredential", async () => {
    const token = generateTableSas(t.tableName, credential, { permissions: { query: true } });
    const c = sasClient(token);
    assert.equal((await c.getEntity("p", "r")).v, 1);
    assert.equal((await all(c.listEntities())).length >= 1, true);
  });

  it("a read-only table SAS cannot insert: 403 AuthorizationPermissionMismatch", async () => {
    const token = generateTableSas(t.tableName, credential, { permissions: { query: true } });
    await expectError(
      sasClient(token).createEntity({ partitionKey: "p", rowKey: "w" }),
      403,
      "AuthorizationPermissionMismatch",
    );
  });

  it("an add/update/delete table SAS writes", async () => {
    const token = generateTableSas(t.tableName, credential, {
      permissions: { query: true, add: true, update: true, delete: true },
    });
    const c = sasClient(token);
    await c.createEntity({ partitionKey: "p", rowKey: "w2", v: 2 });
    await c.updateEntity({ partitionKey: "p", rowKey: "w2", v: 3 }, "Merge");
    assert.equal((await c.getEntity("p", "w2")).v, 3);
    await c.deleteEntity("p", "w2");
  });

  it("an expired table SAS: 403 AuthenticationFailed", async () => {
    const token = generateTableSas(t.tableName, credential, {
      permissions: { query: true },
      startsOn: new Date(Date.now() - 7200e3),
      expiresOn: new Date(Date.now() - 3600e3),
    });
    await expectError(all(sasClient(token).listEntities()), 403, "AuthenticationFailed");
  });

  it("a connection string carrying a SAS (SharedAccessSignature=...)", async () => {
    const token = generateTableSas(t.tableName, credential, { permissions: { query: true } });
    const cs = `TableEndpoint=${endpoint};SharedAccessSignature=${token}`;
    const c = TableClient.fromConnectionString(cs, t.tableName, clientOptions);
    assert.equal((await c.getEntity("p", "r")).v, 1);
  });

  it("generateAccountSas: entity reads through an account SAS", async () => {
    const token = generateAccountSas(credential, {
      permissions: { query: true, list: true },
      resourceTypes: "sco",
    });
    assert.equal((await sasClient(token).getEntity("p", "r")).v, 1);
  });

  it("setAccessPolicy / getAccessPolicy round-trip", async () => {
    const start = new Date("2024-01-01T00:00:00Z");
    const expiry = new Date("2031-02-01T12:30:45Z");
    await t.setAccessPolicy([
      { id: "p1", accessPolicy: { start, expiry, permission: "raud" } },
      { id: "ro", accessPolicy: { permission: "r" } },
    ]);
    const got = await t.getAccessPolicy();
    const ids = got.map((s) => s.id).sort();
    assert.deepEqual(ids, ["p1", "ro"]);
    const p1 = got.find((s) => s.id === "p1");
    assert.equal(p1.accessPolicy.permission, "raud");
    assert.equal(p1.accessPolicy.start.toISOString(), start.toISOString());
    assert.equal(p1.accessPolicy.expiry.toISOString(), expiry.toISOString());
  });

  it("a SAS naming a stored access policy (si) is honoured", async () => {
    await t.setAccessPolicy([
      {
        id: "reader",
        accessPolicy: { start: new Date(Date.now() - 300e3), expiry: new Date(Date.now() + 3600e3), permission: "r" },
      },
    ]);
    const token = generateTableSas(t.tableName, credential, { identifier: "reader" });
    const c = sasClient(token);
    assert.equal((await c.getEntity("p", "r")).v, 1);
    await expectError(c.createEntity({ partitionKey: "p", rowKey: "si" }), 403, "AuthorizationPermissionMismatch");
  });
});

describe("service", () => {
  it("getProperties / setProperties round-trip CORS and logging", async () => {
    const svc = serviceClient();
    await svc.setProperties({
      cors: [
        {
          allowedOrigins: "https://js.example",
          allowedMethods: "GET,PUT",
          allowedHeaders: "x-ms-*",
          exposedHeaders: "x-ms-request-id",
          maxAgeInSeconds: 30,
        },
      ],
      logging: {
        version: "1.0",
        read: true,
        write: false,
        delete: true,
        retentionPolicy: { enabled: true, days: 2 },
      },
    });
    const p = await svc.getProperties();
    assert.equal(p.cors.length, 1);
    assert.equal(p.cors[0].allowedOrigins, "https://js.example");
    assert.equal(p.cors[0].allowedMethods, "GET,PUT");
    assert.equal(p.cors[0].maxAgeInSeconds, 30);
    assert.equal(p.logging.read, true);
    assert.equal(p.logging.delete, true);
    assert.equal(p.logging.retentionPolicy.days, 2);
    await svc.setProperties({ cors: [] });
  });

  it("getStatistics reports a geo-replication status on the secondary endpoint", async () => {
    const secondary = new TableServiceClient(endpoint.replace(/\/([^/]+)\/?$/, "/$1-secondary"), credential, clientOptions);
    const stats = await secondary.getStatistics();
    assert.ok(["live", "bootstrap", "unavailable"].includes(stats.geoReplication?.status), JSON.stringify(stats));
  });

  it("getStatistics on the primary endpoint: 400 InvalidQueryParameterValue", async () => {
    await expectError(serviceClient().getStatistics(), 400, "InvalidQueryParameterValue");
  });

  it("TableServiceClient with an account SAS lists tables", async () => {
    const token = generateAccountSas(credential, {
      permissions: { query: true, list: true },
      resourceTypes: "sco",
    });
    const svc = new TableServiceClient(endpoint, new AzureSASCredential(token), clientOptions);
    const names = (await all(svc.listTables())).map((x) => x.name);
    assert.ok(names.length > 0);
  });
});
