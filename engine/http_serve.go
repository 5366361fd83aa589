package engine

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"math/bits"
	"net/http"
	"os"
	"runtime/debug"
	"strconv"
	"strings"
	"time"

	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"

	"github.com/ttl-archiver/archiver/engine/internal/apimodel"
	"github.com/ttl-archiver/archiver/engine/internal/awserr"
)

// maxBody bounds a request body: DynamoDB's largest requests (BatchWriteItem,
// TransactWriteItems) are capped at 16 MB of items plus some JSON overhead.
const maxBody = 20 << 20

const (
	targetDynamoDB = "DynamoDB_20120810."
	targetStreams  = "DynamoDBStreams_20120810."
	errTypePrefix  = "com.amazonaws.dynamodb.v20120810#"
)

type opFunc func(e *Engine, ctx context.Context, body []byte) (any, error)

// ops maps DynamoDB operation names to their handlers.
var ops = map[string]opFunc{
	"CreateTable":        (*Engine).opCreateTable,
	"DescribeTable":      (*Engine).opDescribeTable,
	"ListTables":         (*Engine).opListTables,
	"DeleteTable":        (*Engine).opDeleteTable,
	"UpdateTable":        (*Engine).opUpdateTable,
	"DescribeTimeToLive": (*Engine).opDescribeTimeToLive,
	"UpdateTimeToLive":   (*Engine).opUpdateTimeToLive,
	"PutItem":            (*Engine).opPutItem,
	"GetItem":            (*Engine).opGetItem,
	"UpdateItem":         (*Engine).opUpdateItem,
	"DeleteItem":         (*Engine).opDeleteItem,
	"Query":              (*Engine).opQuery,
	"Scan":               (*Engine).opScan,
	"BatchGetItem":       (*Engine).opBatchGetItem,
	"BatchWriteItem":     (*Engine).opBatchWriteItem,
	"TransactWriteItems": (*Engine).opTransactWriteItems,
	"TransactGetItems":   (*Engine).opTransactGetItems,
	"DescribeEndpoints":  (*Engine).opDescribeEndpoints,
	"DescribeLimits":     (*Engine).opDescribeLimits,

	// PartiQL (api_partiql.go).
	"ExecuteStatement":      (*Engine).opExecuteStatement,
	"BatchExecuteStatement": (*Engine).opBatchExecuteStatement,
	"ExecuteTransaction":    (*Engine).opExecuteTransaction,
}

var streamOps = map[string]bool{"ListStreams": true, "DescribeStream": true, "GetShardIterator": true, "GetRecords": true}

// ServeHTTP serves the DynamoDB JSON 1.0 protocol (X-Amz-Target
// DynamoDB_20120810.<Op>) and the DynamoDB Streams protocol
// (DynamoDBStreams_20120810.<Op>). Any credentials are accepted. Paths
// under /_engine/ are the control API (see control_api.go).
func (e *Engine) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	e.boundBody(w, r)
	if err := e.checkHost(r); err != nil {
		e.logRefusal(&e.guardLog.host, "request refused for its Host", zap.String("remote", r.RemoteAddr), zap.Error(err))
		if strings.HasPrefix(r.URL.Path, controlPrefix) {
			if isUIPath(r.URL.Path) {
				setUIHeaders(w.Header()) // a refusal is a console answer too: never framed, sniffed or cached
			}
			writeControl(w, http.StatusForbidden, map[string]string{"error": err.Error()})
		} else {
			e.writeError(w, awserr.New(codeAccessDenied, err.Error()), http.StatusForbidden)
		}
		return
	}
	if e.p != nil && r.Method == http.MethodPost && e.p.closed() {
		// Refused before anything changes: nothing would be durable.
		e.writeError(w, errEngineClosed, 0)
		return
	}
	if strings.HasPrefix(r.URL.Path, controlPrefix) {
		if isUIPath(r.URL.Path) {
			e.serveUI(w, r)
			return
		}
		e.serveControl(w, r)
		return
	}
	e.serveAPI(w, r)
}

// serveAPI serves one request of the DynamoDB or Streams API: routed by
// its X-Amz-Target, its body read, its Region taken, the hook run, the
// body held to the API model, the handler run, and the answer sent once
// what it changed is durable.
func (e *Engine) serveAPI(w http.ResponseWriter, r *http.Request) {
	reqID := e.answerHeaders(w)
	op := ""
	start := time.Now()
	defer func() {
		if ce := e.log.Check(zapcore.DebugLevel, "request"); ce != nil {
			ce.Write(zap.String("op", op), zap.String("requestId", reqID), zap.Duration("took", time.Since(start)))
		}
	}()
	defer func() {
		if p := recover(); p != nil {
			e.log.Error("engine: panic serving request", zap.String("op", op), zap.String("requestId", reqID),
				zap.Any("panic", p), zap.ByteString("stack", debug.Stack()))
			e.writeError(w, awserr.New(awserr.CodeInternalServerError, "Internal server error"), 500)
		}
	}()
	if r.Method != http.MethodPost {
		if r.Method == http.MethodGet && r.URL.Path == "/" {
			w.Header().Set("Content-Type", "text/plain")
			io.WriteString(w, "healthy: dynamodb."+e.o.Region+".amazonaws.com ")
			return
		}
		e.writeError(w, awserr.New(awserr.CodeUnknownOperation, "Only POST requests are supported"), 0)
		return
	}
	op, streamsAPI, fn, err := route(r.Header.Get("X-Amz-Target"))
	if err != nil {
		e.writeError(w, err, 0)
		return
	}
	body, err := e.readBody(w, r, maxBody)
	if err != nil {
		e.writeBodyError(w, err)
		return
	}
	region, err := requestRegion(r, e.o.Region)
	if err != nil {
		e.writeError(w, err, 0)
		return
	}
	ctx := withRegion(r.Context(), region)
	if e.hookRefused(w, op, r) {
		return
	}
	if err := checkModel(streamsAPI, op, body); err != nil {
		e.writeError(w, err, 0)
		return
	}
	var resp any
	if streamsAPI {
		resp, err = e.streams.Handle(ctx, region, op, body)
	} else {
		resp, err = fn(e, ctx, body)
	}
	if e.notSynced(w, op, streamsAPI, err) {
		return
	}
	if err != nil {
		e.writeError(w, err, 0)
		return
	}
	e.writeResponse(w, op, resp)
}

// checkModel holds a request body to the API model (apimodel.Check) before
// its handler runs, except GetItem's: its handler's fast read takes only
// bodies the model passes, and it checks the others itself, first.
func checkModel(streamsAPI bool, op string, body []byte) error {
	if !streamsAPI && op == "GetItem" {
		return nil
	}
	return apimodel.Check(streamsAPI, op, body)
}

// answerHeaders sets the headers every API answer carries, a new request
// ID and, on an engine clock other than the machine's, the Date, and
// returns the request ID.
func (e *Engine) answerHeaders(w http.ResponseWriter) string {
	reqID := e.requestID()
	h := w.Header()
	h["X-Amzn-Requestid"] = []string{reqID} // x-amzn-RequestId, canonical: Set would canonicalize it per request
	if _, real := e.clock.(realClock); !real {
		// DynamoDB's Date is its own clock, and clients check theirs
		// against it (archiver sweep pauses on skew); net/http's default
		// would be the machine's, whatever the engine's clock says.
		h["Date"] = []string{e.clock.Now().UTC().Format(http.TimeFormat)}
	}
	return reqID
}

// route returns the operation an X-Amz-Target names, whether it is of the
// Streams API, and its handler (nil for the Streams API, whose registry
// serves it); an unknown target or operation is UnknownOperationException,
// with op set when the prefix was known.
func route(target string) (op string, streamsAPI bool, fn opFunc, err error) {
	switch {
	case strings.HasPrefix(target, targetDynamoDB):
		op = target[len(targetDynamoDB):]
	case strings.HasPrefix(target, targetStreams):
		op = target[len(targetStreams):]
		streamsAPI = true
	default:
		return "", false, nil, awserr.New(awserr.CodeUnknownOperation, "Missing or unknown X-Amz-Target header")
	}
	if streamsAPI {
		if !streamOps[op] {
			return op, true, nil, awserr.Newf(awserr.CodeUnknownOperation, "Unknown operation: %s", op)
		}
	} else if fn = ops[op]; fn == nil {
		return op, false, nil, awserr.Newf(awserr.CodeUnknownOperation, "Unknown operation: %s", op)
	}
	return op, streamsAPI, fn, nil
}

// writeBodyError answers a request whose body could not be read: too
// large (413), not in time (408), or cut off.
func (e *Engine) writeBodyError(w http.ResponseWriter, err error) {
	switch {
	case errors.Is(err, errBodyTooLarge):
		e.writeError(w, awserr.Validation("Request body exceeds the maximum allowed size of %d bytes", maxBody), 413)
	case errors.Is(err, os.ErrDeadlineExceeded):
		e.writeError(w, awserr.Newf(codeRequestTimeout, "%v", err), http.StatusRequestTimeout)
	default:
		e.writeError(w, awserr.Newf(awserr.CodeSerialization, "could not read request body: %v", err), 0)
	}
}

// hookRefused runs the request hook (Hooks.OnRequest, SetHook) on a
// request and, when it returns an error, answers with it and reports
// true: an *Error as it is, any other as a 500.
func (e *Engine) hookRefused(w http.ResponseWriter, op string, r *http.Request) bool {
	hook := e.hook.Load()
	if hook == nil {
		return false
	}
	err := (*hook)(op, r)
	if err == nil {
		return false
	}
	var he *Error
	if errors.As(err, &he) {
		e.writeError(w, &awserr.Error{Code: he.Code, Message: he.Message, Status: he.Status}, 0)
	} else {
		e.writeError(w, awserr.New(awserr.CodeInternalServerError, err.Error()), 500)
	}
	return true
}

// notSynced waits, with a data directory, until what a request changed
// (and saw) is durable; when the log cannot be synced and the request
// was a write it did not refuse (err), it answers that the outcome is
// unknown and reports true. A read, or a write the log refused (it
// changed nothing), is answered even when the log cannot be written.
func (e *Engine) notSynced(w http.ResponseWriter, op string, streamsAPI bool, err error) bool {
	if e.p == nil {
		return false
	}
	if serr := e.p.sync(); serr != nil && !readOnly(op, streamsAPI) && !isRefused(err) {
		e.writeError(w, e.p.notDurable(serr), 0)
		return true
	}
	return false
}

// writeResponse encodes a handler's response and answers 200 with it.
func (e *Engine) writeResponse(w http.ResponseWriter, op string, resp any) {
	var out []byte
	var err error
	switch v := resp.(type) {
	case itemAnswer:
		e.writeItem(w, v.ent.raw())
		return
	case rawResponse:
		out = v
	case json.Marshaler:
		// The engine's own encoders produce valid JSON; skip
		// encoding/json's re-validation of their output.
		out, err = v.MarshalJSON()
	default:
		out, err = json.Marshal(resp)
	}
	if err != nil {
		e.log.Error("engine: encoding response", zap.String("op", op), zap.Error(err))
		e.writeError(w, awserr.New(awserr.CodeInternalServerError, "Internal server error"), 500)
		return
	}
	e.write(w, 200, out)
}

// codeRequestTimeout is the error code of a body not received within
// Options.BodyTimeout (408; the SDKs retry it).
const codeRequestTimeout = "RequestTimeoutException"

// errBodyTooLarge is a request body longer than its limit.
var errBodyTooLarge = errors.New("request body too large")

// readBody reads r's body of at most limit bytes (errBodyTooLarge beyond),
// within the read deadline boundBody set when ServeHTTP began, BodyTimeout
// after the headers (an error wrapping os.ErrDeadlineExceeded after). Its
// buffer grows as bytes arrive, from 4 KiB and never beyond the declared
// Content-Length: a length is a claim, so a client that announces a
// megabyte and stalls holds 4 KiB. Once the whole body is in, the
// deadline is cleared, also for the server's background read that watches
// for the client going away while the request runs, so a long handler is
// never cut. On an error it stays in force and the answer carries
// Connection: close, so net/http does not wait for the rest of the body.
func (e *Engine) readBody(w http.ResponseWriter, r *http.Request, limit int) ([]byte, error) {
	buf, err := e.readBodyBuf(r, limit)
	if err != nil {
		w.Header().Set("Connection", "close")
		return nil, err
	}
	if r.ContentLength != 0 { // boundBody set a deadline
		// ErrNotSupported (a ResponseWriter that is not net/http's): none to clear.
		_ = http.NewResponseController(w).SetReadDeadline(time.Time{})
	}
	return buf, nil
}

// readBodyBuf reads the body for readBody.
func (e *Engine) readBodyBuf(r *http.Request, limit int) ([]byte, error) {
	if r.ContentLength > int64(limit) {
		return nil, errBodyTooLarge
	}
	want := limit + 1 // one more than allowed: reading it means too large
	if r.ContentLength >= 0 {
		want = int(r.ContentLength)
	}
	buf := make([]byte, 0, min(want, 4<<10))
	e.bodiesInRead.Add(1)
	defer e.bodiesInRead.Add(-1)
	for {
		if len(buf) == cap(buf) {
			if len(buf) >= want {
				break
			}
			buf = append(buf, 0)[:len(buf)] // append's growth: amortized doubling
			buf = buf[:len(buf):min(cap(buf), want)]
		}
		n, err := r.Body.Read(buf[len(buf):cap(buf)])
		buf = buf[:len(buf)+n]
		if err == io.EOF {
			break
		}
		if err != nil {
			if errors.Is(err, os.ErrDeadlineExceeded) {
				return nil, fmt.Errorf("request body not received within %v (BodyTimeout, --body-timeout): %d bytes arrived: %w", e.o.BodyTimeout, len(buf), err)
			}
			return nil, err
		}
	}
	if len(buf) > limit {
		return nil, errBodyTooLarge
	}
	return buf, nil
}

// write answers status with body.
func (e *Engine) write(w http.ResponseWriter, status int, body []byte) {
	setBodyHeaders(w.Header(), crc32.ChecksumIEEE(body), len(body))
	w.WriteHeader(status)
	w.Write(body)
}

// The parts of an itemAnswer around the item, and the CRC32 of the first:
// constants (a []byte given to crc32 escapes, and would be allocated per
// answer).
var (
	itemOpen, itemClose = []byte(`{"Item":`), []byte(`}`)
	itemOpenCRC         = crc32.ChecksumIEEE(itemOpen)
)

// writeItem answers 200 with {"Item":raw}, raw written as it is.
func (e *Engine) writeItem(w http.ResponseWriter, raw []byte) {
	crc := crc32.Update(crc32.Update(itemOpenCRC, crc32.IEEETable, raw), crc32.IEEETable, itemClose)
	setBodyHeaders(w.Header(), crc, len(itemOpen)+len(raw)+len(itemClose))
	w.WriteHeader(200)
	w.Write(itemOpen)
	w.Write(raw)
	w.Write(itemClose)
}

// setBodyHeaders sets the headers of an answer's body: its Content-Type,
// its X-Amz-Crc32 (the SDKs check it) and its Content-Length. The keys are
// canonical, set directly; the values take one allocation for their
// strings and one for their slices.
func setBodyHeaders(h http.Header, crc uint32, n int) {
	var b [24]byte // a CRC32's 10 digits at most, and a length
	d := strconv.AppendUint(b[:0], uint64(crc), 10)
	c := len(d)
	s := string(strconv.AppendInt(d, int64(n), 10))
	v := [...]string{"application/x-amz-json-1.0", s[:c], s[c:]}
	h["Content-Type"], h["X-Amz-Crc32"], h["Content-Length"] = v[0:1:1], v[1:2:2], v[2:3:3]
}

// writeError sends err as an AWS error document. Errors that are not
// *awserr.Error are bugs: they are logged and sent as a bare 500.
func (e *Engine) writeError(w http.ResponseWriter, err error, status int) {
	var doc = map[string]any{}
	var ae *awserr.Error
	var cf *condFailed
	var tc *txCanceled
	switch {
	case errors.As(err, &cf):
		doc["__type"] = errTypePrefix + awserr.CodeConditionalCheck
		doc["message"] = "The conditional request failed"
		if cf.item != nil {
			doc["Item"] = cf.item
		}
	case errors.As(err, &tc):
		doc["__type"] = errTypePrefix + "TransactionCanceledException"
		doc["message"] = tc.message()
		doc["CancellationReasons"] = tc.reasons
	case errors.As(err, &ae):
		doc["__type"] = errTypePrefix + ae.Code
		doc["message"] = ae.Message
		if status == 0 {
			status = ae.HTTPStatus()
		}
	default:
		e.log.Error("engine: internal error", zap.Error(err))
		doc["__type"] = errTypePrefix + awserr.CodeInternalServerError
		doc["message"] = "Internal server error"
		status = 500
	}
	if status == 0 {
		status = 400
	}
	b, merr := json.Marshal(doc)
	if merr != nil {
		b = []byte(`{"__type":"` + errTypePrefix + `InternalServerError","message":"Internal server error"}`)
		status = 500
	}
	e.write(w, status, b)
}

// requestID returns a new request ID: 52 characters of A-Z and 0-9, as
// DynamoDB's look, unique within the engine. Each of four 64-bit words
// mixed from the request's number gives 13 base-36 digits of its value
// as a fraction of 2^64, one multiplication each (the four side by side);
// 36^13 > 2^64, so the first word's digits differ for every number.
func (e *Engine) requestID() string {
	const alphabet = "ABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789"
	n, g := e.reqSeq.Add(1)^e.reqSalt, uint64(0x9E3779B97F4A7C15)
	x0, x1, x2, x3 := mix64(n), mix64(n+g), mix64(n+2*g), mix64(n+3*g) // x0: a bijection of n
	var b [52]byte
	for i := range 13 {
		var d0, d1, d2, d3 uint64
		d0, x0 = bits.Mul64(x0, 36)
		d1, x1 = bits.Mul64(x1, 36)
		d2, x2 = bits.Mul64(x2, 36)
		d3, x3 = bits.Mul64(x3, 36)
		b[i], b[13+i], b[26+i], b[39+i] = alphabet[d0], alphabet[d1], alphabet[d2], alphabet[d3]
	}
	return string(b[:])
}

// mix64 is SplitMix64's finalizer: a bijection of 64-bit words whose
// output bits each depend on every input bit.
func mix64(z uint64) uint64 {
	z = (z ^ z>>30) * 0xBF58476D1CE4E5B9
	z = (z ^ z>>27) * 0x94D049BB133111EB
	return z ^ z>>31
}
