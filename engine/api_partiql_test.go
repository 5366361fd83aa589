package engine_test

import (
	"fmt"
	"reflect"
	"sort"
	"strings"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	stypes "github.com/aws/aws-sdk-go-v2/service/dynamodbstreams/types"

	"github.com/ttl-archiver/archiver/engine"
)

const nwf = "Statement wasn't well formed, can't be processed: "

// pqEnv has table "pqt" (pk S, sk N) with a GSI "byColor" (color S) and
// items a/1..a/5 and b/1..b/2.
func pqEnv(t *testing.T) *env {
	e := newEnv(t, engine.Options{})
	e.createTable("pqt", "N", func(in *dynamodb.CreateTableInput) {
		in.AttributeDefinitions = append(in.AttributeDefinitions, types.AttributeDefinition{AttributeName: aws.String("color"), AttributeType: types.ScalarAttributeTypeS})
		in.GlobalSecondaryIndexes = []types.GlobalSecondaryIndex{{
			IndexName:  aws.String("byColor"),
			KeySchema:  []types.KeySchemaElement{{AttributeName: aws.String("color"), KeyType: types.KeyTypeHash}},
			Projection: &types.Projection{ProjectionType: types.ProjectionTypeAll},
		}}
	})
	for i := 1; i <= 5; i++ {
		it := item{"pk": S("a"), "sk": N(fmt.Sprint(i)), "n": N(fmt.Sprint(i * 10)), "name": S(fmt.Sprintf("x%d", i)),
			"color": S([]string{"red", "blue"}[i%2]), "tags": SS("t", fmt.Sprint("t", i))}
		if i == 2 {
			it["opt"] = S("here")
			it["m"] = &types.AttributeValueMemberM{Value: item{"l": &types.AttributeValueMemberL{Value: []types.AttributeValue{
				&types.AttributeValueMemberM{Value: item{"c": S("deep")}}}}}}
		}
		e.put("pqt", it)
	}
	e.put("pqt", item{"pk": S("b"), "sk": N("1"), "n": N("100")})
	e.put("pqt", item{"pk": S("b"), "sk": N("2"), "n": N("200"), "opt": &types.AttributeValueMemberNULL{Value: true}})
	return e
}

func (e *env) exec(stmt string, params ...types.AttributeValue) (*dynamodb.ExecuteStatementOutput, error) {
	in := &dynamodb.ExecuteStatementInput{Statement: aws.String(stmt)}
	if len(params) > 0 {
		in.Parameters = params
	}
	return e.db.ExecuteStatement(e.ctx, in)
}

// ids renders items as pk/sk, in the order given.
func ids(items []item) string {
	var out []string
	for _, it := range items {
		out = append(out, sOf(it, "pk")+"/"+sOf(it, "sk"))
	}
	return strings.Join(out, " ")
}

func TestPartiQLSelect(t *testing.T) {
	e := pqEnv(t)
	cases := []struct {
		stmt   string
		params []types.AttributeValue
		want   string // ids in order; sorted when sorted is set
		sorted bool
	}{
		{stmt: `SELECT * FROM "pqt" WHERE pk = 'a'`, want: "a/1 a/2 a/3 a/4 a/5"},
		{stmt: `SELECT * FROM pqt WHERE pk = ? AND sk > ?`, params: []types.AttributeValue{S("a"), N("3")}, want: "a/4 a/5"},
		{stmt: `SELECT * FROM "pqt" WHERE 3 >= sk AND pk = 'a'`, want: "a/1 a/2 a/3"},
		{stmt: `SELECT * FROM "pqt" WHERE pk IN ['a', 'b'] AND sk <= 1`, want: "a/1 b/1"},
		{stmt: `SELECT * FROM "pqt" WHERE pk IN ('b', 'zz') `, want: "b/1 b/2"},
		{stmt: `SELECT * FROM "pqt" WHERE pk IN ?`, params: []types.AttributeValue{&types.AttributeValueMemberL{Value: []types.AttributeValue{S("b")}}}, want: "b/1 b/2"},
		{stmt: `SELECT * FROM "pqt" WHERE pk = 'a' AND sk BETWEEN 2 AND 3`, want: "a/2 a/3"},
		{stmt: `SELECT * FROM "pqt" WHERE pk = 'a' AND sk NOT BETWEEN 2 AND 4`, want: "a/1 a/5"},
		{stmt: `SELECT * FROM "pqt" WHERE pk = 'a' ORDER BY sk DESC`, want: "a/5 a/4 a/3 a/2 a/1"},
		{stmt: `SELECT * FROM "pqt" WHERE pk = 'a' AND sk <> 3 AND sk IN (1, 3, 4)`, want: "a/1 a/4"},
		{stmt: `SELECT * FROM "pqt" WHERE pk = 'a' AND (color = 'red' OR NOT (n < 40))`, want: "a/2 a/4 a/5"},
		{stmt: `SELECT * FROM "pqt" WHERE pk = 'a' AND begins_with(name, 'x3')`, want: "a/3"},
		{stmt: `SELECT * FROM "pqt" WHERE pk = 'a' AND contains(tags, 't4')`, want: "a/4"},
		{stmt: `SELECT * FROM "pqt" WHERE pk = 'a' AND size(name) = 2 AND size(tags) > 1`, want: "a/1 a/2 a/3 a/4 a/5"},
		{stmt: `SELECT * FROM "pqt" WHERE attribute_exists(opt)`, want: "a/2 b/2", sorted: true},
		{stmt: `SELECT * FROM "pqt" WHERE opt IS NOT MISSING AND pk = 'a'`, want: "a/2"},
		{stmt: `SELECT * FROM "pqt" WHERE pk = 'b' AND opt IS MISSING`, want: "b/1"},
		{stmt: `SELECT * FROM "pqt" WHERE pk = 'b' AND opt IS NULL`, want: "b/1 b/2"},
		{stmt: `SELECT * FROM "pqt" WHERE pk = 'a' AND ATTRIBUTE_EXISTS("opt") = true`, want: "a/2"},
		{stmt: `SELECT * FROM "pqt" WHERE pk = 'a' AND opt IS STRING AND n IS NUMBER AND tags IS BAG`, want: "a/2"},
		{stmt: `SELECT * FROM "pqt" WHERE pk = 'b' AND opt IS NOT STRING`, want: "b/1 b/2"},
		{stmt: `SELECT * FROM "pqt" WHERE m.l[0].c = 'deep'`, want: "a/2"},
		{stmt: `SELECT * FROM "pqt" WHERE n >= 40`, want: "a/4 a/5 b/1 b/2", sorted: true},
		{stmt: `SELECT * FROM "pqt"`, want: "a/1 a/2 a/3 a/4 a/5 b/1 b/2", sorted: true},
		{stmt: `SELECT * FROM "pqt"."byColor" WHERE color = 'red'`, want: "a/2 a/4", sorted: true},
		{stmt: `SELECT * FROM "pqt" WHERE pk = 1`, want: ""},
		{stmt: `SELECT * FROM "pqt" WHERE pk IN ['b', name]`, want: "b/1 b/2", sorted: true},
		{stmt: `SELECT * FROM "pqt" WHERE pk = 'a' AND sk BETWEEN 2 AND n`, want: "a/2 a/3 a/4 a/5"},
		{stmt: `SELECT * FROM "pqt" WHERE pk = 'a' AND sk = 1 OR pk = 'b' AND sk = 2`, want: "a/1 b/2", sorted: true},
		{stmt: "-- comment\nSELECT * FROM \"pqt\" /* here */ WHERE pk = 'a' AND n = 2e1;", want: "a/2"},
	}
	for _, c := range cases {
		out, err := e.exec(c.stmt, c.params...)
		if err != nil {
			t.Errorf("%s: %v", c.stmt, err)
			continue
		}
		got := ids(out.Items)
		if c.sorted {
			f := strings.Fields(got)
			sort.Strings(f)
			got = strings.Join(f, " ")
		}
		if got != c.want || out.NextToken != nil {
			t.Errorf("%s:\n got %q (next %v)\nwant %q", c.stmt, got, out.NextToken, c.want)
		}
	}
}

func TestPartiQLSelectProjection(t *testing.T) {
	e := pqEnv(t)
	// A column is named by its path's last name; indexes after it stay.
	for stmt, want := range map[string]string{
		`SELECT sk, m.l[0].c, nope FROM "pqt" WHERE pk = 'a' AND sk = 2`: `{"c":deep,"sk":2}`,
		`SELECT m.l[0] FROM "pqt" WHERE pk = 'a' AND sk = 2`:             `{"l":[{"c":deep}]}`,
		`SELECT "m" FROM "pqt" WHERE pk = 'a' AND sk = 2`:                `{"m":{"l":[{"c":deep}]}}`,
		`SELECT n FROM "pqt"."byColor" WHERE color = 'red'`:              `{"n":20}`,
	} {
		out, err := e.exec(stmt)
		if err != nil || len(out.Items) == 0 || render(out.Items[0]) != want {
			t.Errorf("%s: %v %v, want %s", stmt, err, out, want)
		}
	}
	// Batches and transactions project alike.
	bo, err := e.db.BatchExecuteStatement(e.ctx, &dynamodb.BatchExecuteStatementInput{Statements: []types.BatchStatementRequest{
		{Statement: aws.String(`SELECT m.l[0].c FROM "pqt" WHERE pk = 'a' AND sk = 2`)}}})
	if err != nil || render(bo.Responses[0].Item) != `{"c":deep}` {
		t.Fatalf("batch: %v %+v", err, bo)
	}
}

func TestPartiQLPaging(t *testing.T) {
	e := pqEnv(t)
	for _, c := range []struct {
		stmt  string
		limit int32
		want  string
	}{
		{`SELECT * FROM "pqt" WHERE pk IN ['a', 'b']`, 2, "a/1 a/2 a/3 a/4 a/5 b/1 b/2"},
		{`SELECT * FROM "pqt" WHERE pk IN ['b', 'a'] AND n > 20`, 3, "b/1 b/2 a/3 a/4 a/5"},
		{`SELECT * FROM "pqt" WHERE pk = 'a' ORDER BY sk DESC`, 4, "a/5 a/4 a/3 a/2 a/1"},
		{`SELECT * FROM "pqt" WHERE n > 0`, 1, "a/1 a/2 a/3 a/4 a/5 b/1 b/2"},
	} {
		in := &dynamodb.ExecuteStatementInput{Statement: aws.String(c.stmt), Limit: aws.Int32(c.limit), ConsistentRead: aws.Bool(true)}
		var all []item
		for pages := 0; ; pages++ {
			out, err := e.db.ExecuteStatement(e.ctx, in)
			if err != nil {
				t.Fatalf("%s: %v", c.stmt, err)
			}
			if len(out.Items) > int(c.limit) || pages > 20 {
				t.Fatalf("%s: page of %d items (limit %d), page %d", c.stmt, len(out.Items), c.limit, pages)
			}
			all = append(all, out.Items...)
			if out.NextToken == nil {
				break
			}
			if out.LastEvaluatedKey == nil {
				t.Fatalf("%s: NextToken without LastEvaluatedKey", c.stmt)
			}
			in.NextToken = out.NextToken
		}
		got := ids(all)
		if strings.HasPrefix(c.stmt, `SELECT * FROM "pqt" WHERE n`) {
			f := strings.Fields(got)
			sort.Strings(f)
			got = strings.Join(f, " ")
		}
		if got != c.want {
			t.Errorf("%s: got %q, want %q", c.stmt, got, c.want)
		}
	}
	// A token belongs to its statement and parameters.
	first, err := e.db.ExecuteStatement(e.ctx, &dynamodb.ExecuteStatementInput{Statement: aws.String(`SELECT * FROM "pqt" WHERE pk = ?`),
		Parameters: []types.AttributeValue{S("a")}, Limit: aws.Int32(1)})
	if err != nil || first.NextToken == nil {
		t.Fatalf("%v %+v", err, first)
	}
	_, err = e.db.ExecuteStatement(e.ctx, &dynamodb.ExecuteStatementInput{Statement: aws.String(`SELECT * FROM "pqt" WHERE pk = ?`),
		Parameters: []types.AttributeValue{S("b")}, NextToken: first.NextToken})
	if errCode(err) != "ValidationException" {
		t.Errorf("NextToken with other parameters: %v", err)
	}
	out, err := e.db.ExecuteStatement(e.ctx, &dynamodb.ExecuteStatementInput{Statement: aws.String(`SELECT * FROM "pqt" WHERE pk = 'a'`), Limit: aws.Int32(1)})
	if err != nil || out.NextToken == nil {
		t.Fatalf("%v %+v", err, out)
	}
	for _, tok := range []string{*out.NextToken, "garbage"} {
		_, err = e.db.ExecuteStatement(e.ctx, &dynamodb.ExecuteStatementInput{Statement: aws.String(`SELECT * FROM "pqt" WHERE pk = 'b'`), NextToken: aws.String(tok)})
		if errCode(err) != "ValidationException" {
			t.Errorf("foreign NextToken %q: %v", tok, err)
		}
	}
}

func TestPartiQLErrors(t *testing.T) {
	e := pqEnv(t)
	cases := []struct {
		stmt       string
		params     []types.AttributeValue
		code, msg  string
		consistent bool
	}{
		{stmt: `SELECT * FROM "pqt" WHERE pk = 1 foo`, code: "ValidationException", msg: nwf + "Unexpected token after expression"},
		{stmt: `SELECT * FROM "pqt" t WHERE pk = 'a'`, code: "ValidationException", msg: "Aliasing is not supported"},
		{stmt: `SELECT * FROM "pqt" WHERE pk = 1e2147483648`, code: "ValidationException", msg: nwf},
		{stmt: `INSERT INTO "pqt" VALUE {'pk': 'z', 'sk': 1e126}`, code: "ValidationException", msg: "Number overflow. Attempting to store a number with magnitude larger than supported range under root"},
		{stmt: `SELECT * FROM "nope" WHERE pk = 'a'`, code: "ResourceNotFoundException"},
		{stmt: `SELECT * FROM "pqt" WHERE pk = ?`, code: "ValidationException", msg: "Number of parameters in request and statement don't match."},
		{stmt: `SELECT * FROM "pqt" WHERE pk = 'a'`, params: []types.AttributeValue{S("x")}, code: "ValidationException", msg: "Number of parameters in request and statement don't match."},
		{stmt: `SELECT * FROM "pqt" WHERE pk = ?`, params: []types.AttributeValue{N("abc")}, code: "ValidationException", msg: "The parameter cannot be converted to a numeric value: abc"},
		{stmt: `SELECT * FROM "pqt"."nope" WHERE pk = 'a'`, code: "ValidationException", msg: "The table does not have the specified index"},
		{stmt: `SELECT * FROM "pqt"."byColor" WHERE color = 'red'`, consistent: true, code: "ValidationException", msg: "Strongly consistent read is not supported on Global Secondary Indexes"},
		{stmt: `SELECT * FROM "pqt" WHERE pk = 'a' AND attribute_exists('x')`, code: "ValidationException", msg: "Operator or function requires a document path; operator or function: attribute_exists"},
		{stmt: `SELECT * FROM "pqt" WHERE pk = 'a' AND attribute_exists()`, code: "ValidationException", msg: "Incorrect number of operands for operator or function; operator or function: attribute_exists, number of operands: 0"},
		{stmt: `SELECT * FROM "pqt" WHERE pk = 'a' AND set_add(tags, <<'x'>>) = tags`, code: "ValidationException", msg: "Unrecognized function: set_add at 1:40:7"},
		{stmt: `UPDATE "pqt" SET n = 1 WHERE pk = 'a'`, code: "ValidationException", msg: "Where clause does not contain a mandatory equality on all key attributes"},
		{stmt: `DELETE FROM "pqt" WHERE pk = 'a' AND sk > 1`, code: "ValidationException", msg: "Where clause does not contain a mandatory equality on all key attributes"},
		{stmt: `UPDATE "pqt" SET sk = 9 WHERE pk = 'a' AND sk = 1`, code: "ValidationException", msg: "One or more parameter values were invalid: Cannot update attribute sk. This attribute is part of the key"},
		{stmt: `INSERT INTO "pqt" VALUE {'pk': 'z'}`, code: "ValidationException", msg: "One or more parameter values were invalid: Missing the key sk in the item"},
		{stmt: `INSERT INTO "pqt" VALUE {'pk': 'z', 'sk': 1, 's': <<'x', 'x'>>}`, code: "ValidationException", msg: "One or more parameter values were invalid: Input collection [x, x] contains duplicates."},
		{stmt: `SELECT * FROM "pqt" WHERE n > 1 ORDER BY sk`, code: "ValidationException"},
		{stmt: `SELECT * FROM "pqt" WHERE pk = 'a' AND n <= ?`, params: []types.AttributeValue{BOOL(true)}, code: "ValidationException",
			msg: "Incorrect operand type for operator or function; operator or function: <=, operand type: BOOL"},
		{stmt: `SELECT * FROM "pqt" WHERE pk = 'a' AND n BETWEEN 1 AND [2]`, code: "ValidationException",
			msg: "Incorrect operand type for operator or function; operator or function: BETWEEN, operand type: L"},
		{stmt: `EXISTS(SELECT * FROM "pqt" WHERE pk = 'a' AND sk = 1 AND n = 10)`, code: "ValidationException"},
	}
	for _, c := range cases {
		in := &dynamodb.ExecuteStatementInput{Statement: aws.String(c.stmt), Parameters: c.params}
		if c.consistent {
			in.ConsistentRead = aws.Bool(true)
		}
		_, err := e.db.ExecuteStatement(e.ctx, in)
		if errCode(err) != c.code || c.msg != "" && errMsg(err) != c.msg {
			t.Errorf("%s:\n got %s: %s\nwant %s: %s", c.stmt, errCode(err), errMsg(err), c.code, c.msg)
		}
	}
}

func TestPartiQLWrites(t *testing.T) {
	e := pqEnv(t)
	key := item{"pk": S("w"), "sk": N("1")}
	steps := []struct {
		stmt   string
		params []types.AttributeValue
		code   string // error expected
		want   string // rendered item after the step ("" = absent)
		ret    string // rendered Items[0] of the answer, when RETURNING
	}{
		{stmt: `INSERT INTO "pqt" VALUE {'pk': ?, 'sk': 1, 'n': 1, 'm': {'c': 'x'}, 'l': [1], 's': <<'a', 'b'>>}`, params: []types.AttributeValue{S("w")},
			want: `{"l":[1],"m":{"c":x},"n":1,"pk":w,"s":[a b],"sk":1}`},
		{stmt: `INSERT INTO "pqt" VALUE {'pk': 'w', 'sk': 1}`, code: "DuplicateItemException",
			want: `{"l":[1],"m":{"c":x},"n":1,"pk":w,"s":[a b],"sk":1}`},
		{stmt: `UPDATE "pqt" SET n = n + 1, m.c = ?, l = list_append(l, [2]) SET s = set_add(s, <<'c'>>) WHERE pk = 'w' AND sk = 1`, params: []types.AttributeValue{S("y")},
			want: `{"l":[1,2],"m":{"c":y},"n":2,"pk":w,"s":[a b c],"sk":1}`},
		{stmt: `UPDATE "pqt" SET s = set_delete(s, <<'a'>>) REMOVE l WHERE pk = 'w' AND sk = 1 AND n = 2 RETURNING MODIFIED NEW *`,
			want: `{"m":{"c":y},"n":2,"pk":w,"s":[b c],"sk":1}`, ret: `{"s":[b c]}`},
		{stmt: `FROM "pqt" WHERE pk = 'w' AND sk = 1 SET x = 'f' RETURNING ALL OLD *`,
			want: `{"m":{"c":y},"n":2,"pk":w,"s":[b c],"sk":1,"x":f}`, ret: `{"m":{"c":y},"n":2,"pk":w,"s":[b c],"sk":1}`},
		{stmt: `UPDATE "pqt" SET n = 5 WHERE pk = 'w' AND sk = 1 AND n = 99`, code: "ConditionalCheckFailedException",
			want: `{"m":{"c":y},"n":2,"pk":w,"s":[b c],"sk":1,"x":f}`},
		{stmt: `UPDATE "pqt" SET n = 5 WHERE pk = 'w' AND sk = 2`, code: "ConditionalCheckFailedException",
			want: `{"m":{"c":y},"n":2,"pk":w,"s":[b c],"sk":1,"x":f}`},
		{stmt: `DELETE FROM "pqt" WHERE pk = 'w' AND sk = 1 AND attribute_not_exists(x)`, code: "ConditionalCheckFailedException",
			want: `{"m":{"c":y},"n":2,"pk":w,"s":[b c],"sk":1,"x":f}`},
		{stmt: `DELETE FROM "pqt" WHERE pk = 'w' AND sk = 1 AND x = 'f' RETURNING ALL OLD *`,
			ret: `{"m":{"c":y},"n":2,"pk":w,"s":[b c],"sk":1,"x":f}`},
		{stmt: `DELETE FROM "pqt" WHERE pk = 'w' AND sk = 1`},
	}
	for _, s := range steps {
		out, err := e.exec(s.stmt, s.params...)
		if errCode(err) != s.code {
			t.Fatalf("%s: got %v, want %s", s.stmt, err, s.code)
		}
		if got := e.get("pqt", key); (got == nil && s.want != "") || (got != nil && render(got) != s.want) {
			t.Fatalf("%s: item %s, want %s", s.stmt, render(got), s.want)
		}
		if err != nil {
			continue
		}
		ret := ""
		if len(out.Items) > 0 {
			ret = render(out.Items[0])
		}
		if ret != s.ret || out.Items == nil {
			t.Fatalf("%s: answered %q (%v), want %q", s.stmt, ret, out.Items, s.ret)
		}
	}
	// ALL_OLD on a failed condition returns the item in the error.
	e.put("pqt", item{"pk": S("w"), "sk": N("3"), "n": N("1")})
	_, err := e.db.ExecuteStatement(e.ctx, &dynamodb.ExecuteStatementInput{Statement: aws.String(`UPDATE "pqt" SET n = 2 WHERE pk = 'w' AND sk = 3 AND n = 7`),
		ReturnValuesOnConditionCheckFailure: types.ReturnValuesOnConditionCheckFailureAllOld})
	var cf *types.ConditionalCheckFailedException
	if !asErr(err, &cf) || render(cf.Item) != `{"n":1,"pk":w,"sk":3}` {
		t.Fatalf("ALL_OLD: %v", err)
	}
	_, err = e.exec(`INSERT INTO "pqt" VALUE {'pk': 'w', 'sk': 3}`)
	if errCode(err) != "DuplicateItemException" || errMsg(err) != "Duplicate primary key exists in table" {
		t.Fatalf("duplicate INSERT: %v", err)
	}
}

func TestPartiQLBatch(t *testing.T) {
	e := pqEnv(t)
	batch := func(stmts ...string) (*dynamodb.BatchExecuteStatementOutput, error) {
		in := &dynamodb.BatchExecuteStatementInput{}
		for _, s := range stmts {
			in.Statements = append(in.Statements, types.BatchStatementRequest{Statement: aws.String(s)})
		}
		return e.db.BatchExecuteStatement(e.ctx, in)
	}
	out, err := batch(
		`INSERT INTO "pqt" VALUE {'pk': 'n', 'sk': 1}`,
		`INSERT INTO "pqt" VALUE {'pk': 'a', 'sk': 1}`,
		`UPDATE "pqt" SET n = 7 WHERE pk = 'b' AND sk = 1`,
		`DELETE FROM "pqt" WHERE pk = 'b' AND sk = 2 AND n = 1`,
		`UPDATE "pqt" SET n = 7 WHERE pk = 'b'`,
		`SELEC nonsense`,
	)
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, r := range out.Responses {
		if r.Error == nil {
			got = append(got, "ok:"+aws.ToString(r.TableName))
		} else {
			got = append(got, string(r.Error.Code))
		}
	}
	want := "[ok:pqt DuplicateItem ok:pqt ConditionalCheckFailed ValidationError ValidationError]"
	if fmt.Sprint(got) != want {
		t.Fatalf("responses %v, want %s", got, want)
	}
	if msg := aws.ToString(out.Responses[4].Error.Message); msg != "Where clause does not contain a mandatory equality on all key attributes" {
		t.Fatalf("message %q", msg)
	}
	if e.get("pqt", item{"pk": S("n"), "sk": N("1")}) == nil || sOf(e.get("pqt", item{"pk": S("b"), "sk": N("1")}), "n") != "7" {
		t.Fatal("batch writes not applied")
	}

	out, err = batch(`SELECT n FROM "pqt" WHERE pk = 'a' AND sk = 2`, `SELECT * FROM "pqt" WHERE pk = 'a' AND sk = 99`,
		`SELECT * FROM "pqt" WHERE pk = 'a'`, `SELECT * FROM "pqt" WHERE pk = 'a' AND sk = 1 AND attribute_exists(n)`)
	if err != nil {
		t.Fatal(err)
	}
	if r := out.Responses; render(r[0].Item) != `{"n":20}` || r[1].Item != nil || r[1].Error != nil ||
		r[2].Error == nil || aws.ToString(r[2].Error.Message) != "Select statements within BatchExecuteStatement must specify the primary key in the where clause." ||
		r[3].Error == nil || r[3].Error.Code != types.BatchStatementErrorCodeEnumValidationError {
		t.Fatalf("reads: %+v", out.Responses)
	}

	// ReturnValuesOnConditionCheckFailure puts the item in the entry's Error.
	bo, err := e.db.BatchExecuteStatement(e.ctx, &dynamodb.BatchExecuteStatementInput{Statements: []types.BatchStatementRequest{{
		Statement:                           aws.String(`UPDATE "pqt" SET n = 1 WHERE pk = 'b' AND sk = 1 AND n = 0`),
		ReturnValuesOnConditionCheckFailure: types.ReturnValuesOnConditionCheckFailureAllOld}}})
	if err != nil || bo.Responses[0].Error == nil || render(bo.Responses[0].Error.Item) != `{"n":7,"pk":b,"sk":1}` {
		t.Fatalf("ALL_OLD in a batch: %v %+v", err, bo)
	}

	if _, err := batch(`SELECT * FROM "pqt" WHERE pk = 'a' AND sk = 2`, `DELETE FROM "pqt" WHERE pk = 'a' AND sk = 2`); errCode(err) != "ValidationException" {
		t.Fatalf("mixed batch: %v", err)
	}
	many := make([]string, 26)
	for i := range many {
		many[i] = fmt.Sprintf(`DELETE FROM "pqt" WHERE pk = 'x' AND sk = %d`, i)
	}
	if _, err := batch(many...); errCode(err) != "ValidationException" {
		t.Fatalf("26 statements: %v", err)
	}
}

func TestPartiQLTransaction(t *testing.T) {
	e := pqEnv(t)
	tx := func(stmts ...string) error {
		in := &dynamodb.ExecuteTransactionInput{}
		for _, s := range stmts {
			in.TransactStatements = append(in.TransactStatements, types.ParameterizedStatement{Statement: aws.String(s)})
		}
		out, err := e.db.ExecuteTransaction(e.ctx, in)
		if err == nil && (out.Responses == nil || len(out.Responses) != 0) {
			t.Fatalf("write transaction answered %+v", out.Responses)
		}
		return err
	}
	err := tx(
		`INSERT INTO "pqt" VALUE {'pk': 't', 'sk': 1}`,
		`UPDATE "pqt" SET n = n + 1 WHERE pk = 'a' AND sk = 1`,
		`DELETE FROM "pqt" WHERE pk = 'b' AND sk = 1`,
		`EXISTS(SELECT * FROM "pqt" WHERE pk = 'a' AND sk = 2 AND opt = 'here')`,
	)
	if err != nil {
		t.Fatal(err)
	}
	if e.get("pqt", item{"pk": S("t"), "sk": N("1")}) == nil || sOf(e.get("pqt", item{"pk": S("a"), "sk": N("1")}), "n") != "11" ||
		e.get("pqt", item{"pk": S("b"), "sk": N("1")}) != nil {
		t.Fatal("transaction not applied")
	}
	// All or nothing: one failure cancels every statement.
	err = tx(
		`UPDATE "pqt" SET n = 0 WHERE pk = 'a' AND sk = 1`,
		`INSERT INTO "pqt" VALUE {'pk': 't', 'sk': 1}`,
		`UPDATE "pqt" SET n = 0 WHERE pk = 'a' AND sk = 99`,
		`EXISTS(SELECT * FROM "pqt" WHERE pk = 'a' AND sk = 3 AND opt = 'here')`,
		`DELETE FROM "pqt" WHERE pk = 'a' AND sk = 4 AND n = 40`,
	)
	var tc *types.TransactionCanceledException
	if !asErr(err, &tc) {
		t.Fatalf("got %v", err)
	}
	var codes []string
	for _, r := range tc.CancellationReasons {
		codes = append(codes, aws.ToString(r.Code))
	}
	if fmt.Sprint(codes) != "[None DuplicateItem ConditionalCheckFailed ConditionalCheckFailed None]" {
		t.Fatalf("reasons %v", codes)
	}
	if sOf(e.get("pqt", item{"pk": S("a"), "sk": N("1")}), "n") != "11" || e.get("pqt", item{"pk": S("a"), "sk": N("4")}) == nil {
		t.Fatal("a canceled transaction wrote")
	}
	// Reads: one entry per statement, empty for a missing item.
	out, err := e.db.ExecuteTransaction(e.ctx, &dynamodb.ExecuteTransactionInput{TransactStatements: []types.ParameterizedStatement{
		{Statement: aws.String(`SELECT sk, n FROM "pqt" WHERE pk = ? AND sk = 3`), Parameters: []types.AttributeValue{S("a")}},
		{Statement: aws.String(`SELECT * FROM "pqt" WHERE pk = 'zz' AND sk = 3`)},
	}})
	if err != nil || len(out.Responses) != 2 || render(out.Responses[0].Item) != `{"n":30,"sk":3}` || out.Responses[1].Item != nil {
		t.Fatalf("read transaction: %v %+v", err, out)
	}
	for stmts, msg := range map[[2]string]string{
		{`SELECT * FROM "pqt" WHERE pk = 'a'`, `SELECT * FROM "pqt" WHERE pk = 'a' AND sk = 1`}:                       "Validation failed in TransactStatements[0]: Select statements within ExecuteTransaction must specify the primary key in the where clause.",
		{`UPDATE "pqt" SET n = 1 WHERE pk = 'a' AND sk = 1`, `EXISTS(SELECT * FROM "pqt" WHERE pk = 'a' AND sk = 2)`}: "Validation failed in TransactStatements[1]: EXISTS() must contain a single item read with additional condition",
		{`UPDATE "pqt" SET n = 1 WHERE pk = 'a' AND sk = 1`, `DELETE FROM "pqt" WHERE pk = 'a' AND sk = 1`}:           "Transaction request cannot include multiple operations on one item",
		{`SELECT * FROM "pqt" WHERE pk = 'a' AND sk = 1`, `DELETE FROM "pqt" WHERE pk = 'a' AND sk = 2`}:              "",
	} {
		err := tx(stmts[0], stmts[1])
		if errCode(err) != "ValidationException" || msg != "" && errMsg(err) != msg {
			t.Errorf("%v: %v", stmts, err)
		}
	}
}

// TestPartiQLTransactionToken: a ClientRequestToken makes a retried
// transaction answer without applying again, as TransactWriteItems.
func TestPartiQLTransactionToken(t *testing.T) {
	e := pqEnv(t)
	in := func(stmt string) *dynamodb.ExecuteTransactionInput {
		return &dynamodb.ExecuteTransactionInput{ClientRequestToken: aws.String("tok-1"), ReturnConsumedCapacity: types.ReturnConsumedCapacityTotal,
			TransactStatements: []types.ParameterizedStatement{{Statement: aws.String(stmt), Parameters: []types.AttributeValue{N("1")}}}}
	}
	const inc = `UPDATE "pqt" SET n = n + ? WHERE pk = 'a' AND sk = 1`
	for i := 0; i < 2; i++ {
		out, err := e.db.ExecuteTransaction(e.ctx, in(inc))
		if err != nil || len(out.ConsumedCapacity) != 1 {
			t.Fatalf("call %d: %v %+v", i, err, out)
		}
	}
	if n := sOf(e.get("pqt", item{"pk": S("a"), "sk": N("1")}), "n"); n != "11" {
		t.Fatalf("n = %s after a replay, want 11", n)
	}
	if _, err := e.db.ExecuteTransaction(e.ctx, in(`DELETE FROM "pqt" WHERE pk = 'a' AND sk = 1 AND n > ?`)); errCode(err) != "IdempotentParameterMismatchException" {
		t.Fatalf("other statements, same token: %v", err)
	}
}

// TestPartiQLWritesReachTTLAndIndexes: items PartiQL writes are in the
// GSI and expire by TTL like items the API writes.
func TestPartiQLWritesReachTTLAndIndexes(t *testing.T) {
	e := pqEnv(t)
	e.enableTTL("pqt", "ttl")
	past, future := fmt.Sprint(t0.Unix()-60), fmt.Sprint(t0.Unix()+3600)
	for _, s := range []string{
		`INSERT INTO "pqt" VALUE {'pk': 'ttl', 'sk': 1, 'color': 'green', 'ttl': ` + past + `}`,
		`INSERT INTO "pqt" VALUE {'pk': 'ttl', 'sk': 2, 'color': 'green', 'ttl': ` + future + `}`,
		`UPDATE "pqt" SET ttl = ` + past + ` WHERE pk = 'ttl' AND sk = 2`,
		`INSERT INTO "pqt" VALUE {'pk': 'ttl', 'sk': 3, 'color': 'green', 'ttl': ` + past + `}`,
		`UPDATE "pqt" SET ttl = ` + future + ` WHERE pk = 'ttl' AND sk = 3`,
	} {
		if _, err := e.exec(s); err != nil {
			t.Fatalf("%s: %v", s, err)
		}
	}
	green := func() string {
		out, err := e.exec(`SELECT * FROM "pqt"."byColor" WHERE color = 'green'`)
		if err != nil {
			t.Fatal(err)
		}
		return ids(out.Items)
	}
	if got := green(); got != "ttl/1 ttl/2 ttl/3" {
		t.Fatalf("GSI before the sweep: %q", got)
	}
	if n := e.sweep(); n != 2 {
		t.Fatalf("swept %d, want 2", n)
	}
	if got := green(); got != "ttl/3" {
		t.Fatalf("GSI after the sweep: %q", got)
	}
}

// TestPartiQLStreamRecordsMatchAPI runs the same writes as API calls on
// one table and as PartiQL on another: both streams must hold the same
// records (event names, keys, images), none for the update that changes
// nothing.
func TestPartiQLStreamRecordsMatchAPI(t *testing.T) {
	e := newEnv(t, engine.Options{})
	for _, name := range []string{"api", "sql"} {
		e.createTable(name, "", func(in *dynamodb.CreateTableInput) {
			in.StreamSpecification = &types.StreamSpecification{StreamEnabled: aws.Bool(true), StreamViewType: types.StreamViewTypeNewAndOldImages}
		})
	}
	key := item{"pk": S("k")}
	upd := func(expr string, vals item) {
		t.Helper()
		if _, err := e.db.UpdateItem(e.ctx, &dynamodb.UpdateItemInput{TableName: aws.String("api"), Key: key,
			UpdateExpression: aws.String(expr), ExpressionAttributeValues: vals}); err != nil {
			t.Fatal(err)
		}
	}
	e.put("api", item{"pk": S("k"), "a": N("1"), "s": SS("x")})
	upd("SET a = :v", item{":v": N("2")})
	upd("SET a = :v", item{":v": N("2.0")}) // unchanged
	upd("ADD s :s REMOVE a", item{":s": SS("y")})
	if _, err := e.db.DeleteItem(e.ctx, &dynamodb.DeleteItemInput{TableName: aws.String("api"), Key: key}); err != nil {
		t.Fatal(err)
	}
	for _, s := range []string{
		`INSERT INTO "sql" VALUE {'pk': 'k', 'a': 1, 's': <<'x'>>}`,
		`UPDATE "sql" SET a = 2 WHERE pk = 'k'`,
		`UPDATE "sql" SET a = 2.0 WHERE pk = 'k'`,
		`UPDATE "sql" SET s = set_add(s, <<'y'>>) REMOVE a WHERE pk = 'k'`,
		`DELETE FROM "sql" WHERE pk = 'k'`,
	} {
		if _, err := e.exec(s); err != nil {
			t.Fatalf("%s: %v", s, err)
		}
	}
	api, sql := streamSummary(e.readAll("api")), streamSummary(e.readAll("sql"))
	if len(api) != 4 || !reflect.DeepEqual(api, sql) {
		t.Fatalf("API records:\n%s\nPartiQL records:\n%s", strings.Join(api, "\n"), strings.Join(sql, "\n"))
	}
}

// streamSummary renders each record's event name, keys and images.
func streamSummary(recs []stypes.Record) []string {
	var out []string
	for _, r := range recs {
		d := r.Dynamodb
		out = append(out, fmt.Sprintf("%s keys=%s old=%s new=%s", r.EventName, streamRender(d.Keys), streamRender(d.OldImage), streamRender(d.NewImage)))
	}
	return out
}

func streamRender(m map[string]stypes.AttributeValue) string {
	if m == nil {
		return "-"
	}
	var parts []string
	for k, v := range m {
		var s string
		switch v := v.(type) {
		case *stypes.AttributeValueMemberS:
			s = "S:" + v.Value
		case *stypes.AttributeValueMemberN:
			s = "N:" + v.Value
		case *stypes.AttributeValueMemberSS:
			ss := append([]string(nil), v.Value...)
			sort.Strings(ss)
			s = fmt.Sprint("SS:", ss)
		default:
			s = fmt.Sprintf("%T", v)
		}
		parts = append(parts, k+"="+s)
	}
	sort.Strings(parts)
	return "{" + strings.Join(parts, " ") + "}"
}
