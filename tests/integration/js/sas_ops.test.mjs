// Every entity operation of @azure/data-tables under a service SAS with
// spr=https,http over plain HTTP, each with the permission the REST
// reference gives it (r; a; u; a+u for upserts; d) and refused without it,
// for two kinds of token:
//  - generateTableSas of the SDK (sv 2019-02-02) with protocol "https,http"
//    and a start time of "now";
//  - a token signed the way Azurite's test suite signs it
//    (tests/table/utils/table.entity.test.utils.ts, generateTableSasToken):
//    sv 2020-10-02, tn as the table was created (mixed case) while the
//    string-to-sign has it lower-cased, st = new Date().toISOString() with
//    milliseconds. Those tokens were refused as not yet valid when the
//    front end compared st with a clock truncated to the second.
import assert from "node:assert/strict";
import { createHmac } from "node:crypto";
import { before, describe, it } from "node:test";

import { AzureSASCredential, TableClient, generateTableSas } from "@azure/data-tables";

import {
  account,
  accountKey,
  all,
  clientOptions,
  credential,
  endpoint,
  expectError,
  tableClient,
  tableName,
} from "./common.mjs";

// As Azurite's generateTableSasToken: the service SAS string-to-sign of
// sv >= 2015-04-05 with spr=https,http.
function azuriteStyleSas(name, permissions) {
  const version = "2020-10-02";
  const protocol = "https,http";
  const start = new Date().toISOString();
  const expiry = new Date(Date.now() + 5 * 60 * 1000).toISOString();
  const sts =
    `${permissions}\n${start}\n${expiry}\n` +
    `/table/${account}/${name.toLowerCase()}\n\n\n${protocol}\n${version}\n\n\n\n`;
  const sig = createHmac("sha256", Buffer.from(accountKey, "base64")).update(sts, "utf8").digest("base64");
  return (
    `sv=${version}&tn=${name}&sp=${permissions}&st=${encodeURIComponent(start)}` +
    `&se=${encodeURIComponent(expiry)}&spr=${encodeURIComponent(protocol)}` +
    `&sig=${encodeURIComponent(sig)}`
  );
}

// The SDK's own token, startsOn now (milliseconds included).
function sdkSas(name, permissions) {
  const p = {
    query: permissions.includes("r"),
    add: permissions.includes("a"),
    update: permissions.includes("u"),
    delete: permissions.includes("d"),
  };
  return generateTableSas(name, credential, {
    permissions: p,
    protocol: "https,http",
    startsOn: new Date(),
    expiresOn: new Date(Date.now() + 5 * 60 * 1000),
  });
}

// Operation, the permission it needs, and what it does to a table holding
// (p, r) = {v: 1}.
const OPS = [
  ["createEntity", "a", (c) => c.createEntity({ partitionKey: "p", rowKey: "n", v: 7 })],
  ["getEntity", "r", (c) => c.getEntity("p", "r")],
  ["listEntities", "r", (c) => all(c.listEntities())],
  ["updateEntity Replace", "u", (c) => c.updateEntity({ partitionKey: "p", rowKey: "r", v: 2 }, "Replace")],
  ["updateEntity Merge", "u", (c) => c.updateEntity({ partitionKey: "p", rowKey: "r", v: 2 }, "Merge")],
  ["upsertEntity Replace (new)", "au", (c) => c.upsertEntity({ partitionKey: "p", rowKey: "u", v: 3 }, "Replace")],
  ["upsertEntity Merge (existing)", "au", (c) => c.upsertEntity({ partitionKey: "p", rowKey: "r", w: 4 }, "Merge")],
  ["deleteEntity", "d", (c) => c.deleteEntity("p", "r")],
];

for (const [kind, makeSas] of [
  ["generateTableSas", sdkSas],
  ["Azurite-style token", azuriteStyleSas],
]) {
  describe(`service SAS (${kind}, spr=https,http, st=now) per operation`, () => {
    let admin;
    before(async () => {
      // Mixed case, as Azurite's getUniqueName makes them.
      admin = tableClient(tableName("SasOps"));
      await admin.createTable();
    });

    async function reset() {
      await admin.upsertEntity({ partitionKey: "p", rowKey: "r", v: 1 }, "Replace");
      for (const rk of ["n", "u"]) {
        try {
          await admin.deleteEntity("p", rk);
        } catch (e) {
          if (e.statusCode !== 404) throw e;
        }
      }
    }

    function sasClient(perm) {
      return new TableClient(endpoint, admin.tableName, new AzureSASCredential(makeSas(admin.tableName, perm)), {
        ...clientOptions,
        retryOptions: { maxRetries: 0 },
      });
    }

    for (const [name, need, run] of OPS) {
      it(`${name} with sp=${need} works`, async () => {
        await reset();
        await run(sasClient(need));
      });

      // Every single letter that is not enough on its own.
      for (const letter of "raud") {
        if (need === letter) continue;
        it(`${name} with sp=${letter} is 403 AuthorizationPermissionMismatch`, async () => {
          await reset();
          await expectError(run(sasClient(letter)), 403, "AuthorizationPermissionMismatch");
        });
      }
    }

    it("the writes took effect", async () => {
      await reset();
      const c = sasClient("raud");
      await c.createEntity({ partitionKey: "p", rowKey: "n", v: 7 });
      await c.updateEntity({ partitionKey: "p", rowKey: "r", v: 2 }, "Replace");
      await c.upsertEntity({ partitionKey: "p", rowKey: "u", v: 3 }, "Merge");
      await c.deleteEntity("p", "n");
      const got = (await all(admin.listEntities())).map((e) => [e.rowKey, e.v]);
      assert.deepEqual(got, [
        ["r", 2],
        ["u", 3],
      ]);
    });
  });
}
