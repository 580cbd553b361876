// What Azurite's own suite (tests/compat/azurite-suite.sh) sends through
// @azure/data-tables and Azure answers: boolean literals as filter terms,
// the typed nulls this SDK makes of an Invalid Date or Infinity (accepted,
// not stored: Azure stores no nulls), and weak ETags that are not the
// entity's (412, also with a lower-case w/).
import assert from "node:assert/strict";
import { before, describe, it } from "node:test";

import { odata } from "@azure/data-tables";

import { all, expectError, keysOf, newTable, userProps } from "./common.mjs";

describe("Azurite suite: filters", () => {
  let t;
  before(async () => {
    t = await newTable("azf");
    for (const pk of ["a", "b", "c"]) {
      for (const rk of ["1", "2"]) {
        await t.createEntity({ partitionKey: pk, rowKey: rk, flag: rk === "1" });
      }
    }
  });

  async function keys(filter) {
    return keysOf(await all(t.listEntities({ queryOptions: { filter } }))).sort();
  }

  it("$filter=true lists everything, false nothing", async () => {
    assert.equal((await keys(odata`true`)).length, 6);
    assert.deepEqual(await keys(odata`false`), []);
  });

  it("boolean literals inside and/or (the suite's query test 14)", async () => {
    const got = await keys(
      odata`(true and RowKey eq ${"1"}) and ((false or PartitionKey eq ${"a"}) or PartitionKey eq ${"b"}) or PartitionKey eq ${"c"}`,
    );
    assert.deepEqual(got, [
      ["a", "1"],
      ["b", "1"],
      ["c", "1"],
      ["c", "2"],
    ]);
    assert.deepEqual(await keys(odata`flag and false`), []);
  });
});

describe("Azurite suite: values and ETags", () => {
  let t;
  before(async () => {
    t = await newTable("azv");
  });

  it("an Invalid Date and Infinity go out as typed nulls: accepted, not stored", async () => {
    await t.createEntity({
      partitionKey: "p",
      rowKey: "nulls",
      when: new Date(""),
      big: { value: Number.POSITIVE_INFINITY, type: "Double" },
      kept: 1,
    });
    assert.deepEqual(userProps(await t.getEntity("p", "nulls")), { kept: 1 });
  });

  it("a Double at the largest finite value round-trips", async () => {
    await t.createEntity({
      partitionKey: "p",
      rowKey: "max",
      x: { value: 1.797693134862315e308, type: "Double" },
    });
    assert.equal((await t.getEntity("p", "max")).x, 1.797693134862315e308);
  });

  for (const etag of ['W/"wrong"', 'w/"wrong"', "w/\"datetime'2015-01-01T23%3A14%3A33.4980000Z'\""]) {
    it(`updateEntity with a weak ETag that is not the entity's (${etag}): 412`, async () => {
      await t.upsertEntity({ partitionKey: "p", rowKey: "etag", v: 1 });
      await expectError(
        t.updateEntity({ partitionKey: "p", rowKey: "etag", v: 2 }, "Merge", { etag }),
        412,
        "UpdateConditionNotSatisfied",
      );
      assert.equal((await t.getEntity("p", "etag")).v, 1);
    });
  }
});
