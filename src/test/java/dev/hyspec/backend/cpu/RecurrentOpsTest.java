package dev.hyspec.backend.cpu;

import static dev.hyspec.backend.cpu.TestData.assertClose;
import static dev.hyspec.backend.cpu.TestData.normal;
import static dev.hyspec.backend.cpu.TestData.uniform;
import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;

import dev.hyspec.backend.GdnDims;
import dev.hyspec.backend.Mamba2Dims;
import dev.hyspec.backend.StateLayout;
import dev.hyspec.backend.Tensor;
import java.util.Arrays;
import java.util.Random;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.EnumSource;

/**
 * The Mamba2 and Gated DeltaNet state operations of {@link CpuBackend}, in both state layouts,
 * against scalar double-precision references written from the formulas in {@code Backend} and
 * against each other (scan ⇄ scan-states ⇄ replay-outputs + replay).
 */
class RecurrentOpsTest {
    private static final double TOL = 1e-5;

    // Mamba2: H = 4 heads of P = 3, state N = 5, G = 2 groups (two heads per group).
    private static final int H = 4;
    private static final int P = 3;
    private static final int N = 5;
    private static final int GR = 2;
    private static final Mamba2Dims M = new Mamba2Dims(H, P, N, GR, 0.05f, 2.0f);
    private static final int M_CONV = H * P + 2 * GR * N;
    private static final int M_STATE = H * P * N;
    private static final int M_HIST = H * P + GR * N + 2 * H;

    // Gated DeltaNet: Hk = 2 key heads of Dk = 5, Hv = 4 value heads of Dv = 3.
    private static final int HK = 2;
    private static final int HV = 4;
    private static final int DK = 5;
    private static final int DV = 3;
    private static final GdnDims G = new GdnDims(HK, HV, DK, DV);
    private static final int G_CONV = 2 * HK * DK + HV * DV;
    private static final int G_STATE = HV * DK * DV;
    private static final int G_HIST = HK * DK + HV * DV + 2 * HV;

    private final CpuBackend be = new CpuBackend();

    /** Per-token inputs: part {@code i} is {@code [tokens, widths[i]]}, row-major. */
    record Tokens(int tokens, int[] widths, float[][] parts) {
        Tokens slice(int from, int to) {
            float[][] p = new float[parts.length][];
            for (int i = 0; i < parts.length; i++) {
                p[i] = Arrays.copyOfRange(parts[i], from * widths[i], to * widths[i]);
            }
            return new Tokens(to - from, widths, p);
        }

        Tokens concat(Tokens o) {
            float[][] p = new float[parts.length][];
            for (int i = 0; i < parts.length; i++) {
                p[i] = Arrays.copyOf(parts[i], parts[i].length + o.parts[i].length);
                System.arraycopy(o.parts[i], 0, p[i], parts[i].length, o.parts[i].length);
            }
            return new Tokens(tokens + o.tokens, widths, p);
        }

        Tensor tensor(CpuBackend be, int i) {
            return be.upload(parts[i], tokens, widths[i]);
        }
    }

    // ---------------------------------------------------------------- Mamba2

    record M2Params(float[] dtBias, float[] aLog, float[] d) {}

    private static M2Params m2Params(Random r) {
        return new M2Params(uniform(r, H, -1, 1), uniform(r, H, -1, 1), normal(r, H, 1));
    }

    /** xBC [T, H·P + 2·G·N] and dtRaw [T, H]; dtRaw spans both clamp bounds. */
    private static Tokens m2Tokens(Random r, int tokens) {
        return new Tokens(tokens, new int[] {M_CONV, H},
                new float[][] {normal(r, tokens * M_CONV, 1), uniform(r, tokens * H, -4, 3)});
    }

    private static int[] m2Shape(StateLayout layout) {
        return layout == StateLayout.VK ? new int[] {H, P, N} : new int[] {H, N, P};
    }

    /** Index of element (h, p, n) of a Mamba2 state: VK is [H, P, N], KV is [H, N, P]. */
    private static int m2Index(StateLayout layout, int h, int p, int n) {
        return layout == StateLayout.VK ? (h * P + p) * N + n : (h * N + n) * P + p;
    }

    /** A state in {@code layout} as a double array indexed (h·P + p)·N + n. */
    private static double[] m2Logical(float[] s, StateLayout layout) {
        double[] l = new double[M_STATE];
        for (int h = 0; h < H; h++) {
            for (int p = 0; p < P; p++) {
                for (int n = 0; n < N; n++) {
                    l[(h * P + p) * N + n] = s[m2Index(layout, h, p, n)];
                }
            }
        }
        return l;
    }

    private static double[] m2Physical(double[] l, StateLayout layout) {
        double[] s = new double[M_STATE];
        for (int h = 0; h < H; h++) {
            for (int p = 0; p < P; p++) {
                for (int n = 0; n < N; n++) {
                    s[m2Index(layout, h, p, n)] = l[(h * P + p) * N + n];
                }
            }
        }
        return s;
    }

    private static double m2Dt(float raw, float bias) {
        double dt = Math.log1p(Math.exp((double) raw + bias));
        return Math.min(Math.max(dt, M.dtMin()), M.dtMax());
    }

    /**
     * Scalar Mamba2 recurrence: {@code h_t = exp(dt·A)·h_{t−1} + dt·x_t ⊗ B_t}, {@code y_t = h_t·C_t + D·x_t};
     * advances {@code st} (indexed (h·P + p)·N + n) and returns y [T, H·P].
     */
    private static double[] m2Reference(double[] st, M2Params prm, Tokens tok) {
        float[] xbc = tok.parts()[0];
        float[] dtRaw = tok.parts()[1];
        double[] y = new double[tok.tokens() * H * P];
        for (int t = 0; t < tok.tokens(); t++) {
            int row = t * M_CONV;
            for (int h = 0; h < H; h++) {
                double dt = m2Dt(dtRaw[t * H + h], prm.dtBias()[h]);
                double decay = Math.exp(-Math.exp(prm.aLog()[h]) * dt);
                int g = h / (H / GR);
                for (int p = 0; p < P; p++) {
                    double x = xbc[row + h * P + p];
                    double acc = 0;
                    for (int n = 0; n < N; n++) {
                        double b = xbc[row + H * P + g * N + n];
                        double c = xbc[row + H * P + GR * N + g * N + n];
                        int i = (h * P + p) * N + n;
                        st[i] = decay * st[i] + dt * x * b;
                        acc += st[i] * c;
                    }
                    y[(t * H + h) * P + p] = acc + prm.d()[h] * x;
                }
            }
        }
        return y;
    }

    /** mamba2Scan on the backend; advances {@code state} in place and returns y. */
    private float[] m2Scan(float[] state, StateLayout layout, M2Params prm, Tokens tok) {
        Tensor s = be.upload(state, m2Shape(layout));
        Tensor y = be.zeros(tok.tokens(), H * P);
        be.mamba2Scan(s, layout, tok.tensor(be, 0), tok.tensor(be, 1), be.upload(prm.dtBias(), H),
                be.upload(prm.aLog(), H), be.upload(prm.d(), H), M, y);
        System.arraycopy(be.download(s), 0, state, 0, M_STATE);
        return be.download(y);
    }

    /** The state after scanning {@code tok} from {@code s0}. */
    private float[] m2After(float[] s0, StateLayout layout, M2Params prm, Tokens tok) {
        float[] s = s0.clone();
        if (tok.tokens() > 0) {
            m2Scan(s, layout, prm, tok);
        }
        return s;
    }

    private float[] m2ReplayOutputs(Tensor state, StateLayout layout, M2Params prm, Tokens tok, Tensor history) {
        Tensor y = be.zeros(tok.tokens(), H * P);
        be.mamba2ReplayOutputs(state, layout, tok.tensor(be, 0), tok.tensor(be, 1), be.upload(prm.dtBias(), H),
                be.upload(prm.aLog(), H), be.upload(prm.d(), H), M, history, y);
        return be.download(y);
    }

    @ParameterizedTest
    @EnumSource(StateLayout.class)
    void mamba2ScanMatchesScalarReference(StateLayout layout) {
        Random r = new Random(11);
        M2Params prm = m2Params(r);
        Tokens tok = m2Tokens(r, 6);
        float[] s0 = normal(r, M_STATE, 0.5);
        double[] ref = m2Logical(s0, layout);
        double[] yRef = m2Reference(ref, prm, tok);
        float[] s = s0.clone();
        float[] y = m2Scan(s, layout, prm, tok);
        assertClose("y", yRef, y, TOL);
        assertClose("final state", m2Physical(ref, layout), s, TOL);
    }

    @ParameterizedTest
    @EnumSource(StateLayout.class)
    void mamba2ScanOneTokenAtATimeMatchesReference(StateLayout layout) {
        Random r = new Random(12);
        M2Params prm = m2Params(r);
        Tokens tok = m2Tokens(r, 5);
        float[] s = normal(r, M_STATE, 0.5);
        double[] ref = m2Logical(s, layout);
        double[] yRef = m2Reference(ref, prm, tok);
        float[] y = new float[0];
        for (int t = 0; t < tok.tokens(); t++) {
            float[] yt = m2Scan(s, layout, prm, tok.slice(t, t + 1));
            y = Arrays.copyOf(y, y.length + yt.length);
            System.arraycopy(yt, 0, y, y.length - yt.length, yt.length);
        }
        assertClose("y", yRef, y, TOL);
        assertClose("final state", m2Physical(ref, layout), s, TOL);
    }

    @ParameterizedTest
    @EnumSource(StateLayout.class)
    void mamba2ScanLayoutsAgree(StateLayout layout) {
        Random r = new Random(13);
        M2Params prm = m2Params(r);
        Tokens tok = m2Tokens(r, 6);
        float[] s = normal(r, M_STATE, 0.5);
        // The same state in the other layout: [H, P, N] ⇄ [H, N, P].
        int rows = layout == StateLayout.VK ? P : N;
        int cols = layout == StateLayout.VK ? N : P;
        float[] other = transposeHeads(s, H, rows, cols);
        float[] y = m2Scan(s, layout, prm, tok);
        float[] yOther = m2Scan(other, layout.other(), prm, tok);
        assertClose("y", y, yOther, TOL);
        assertClose("final state", s, transposeHeads(other, H, cols, rows), TOL);
    }

    @ParameterizedTest
    @EnumSource(StateLayout.class)
    void mamba2ScanStatesMatchPrefixScans(StateLayout layout) {
        Random r = new Random(14);
        M2Params prm = m2Params(r);
        int tokens = 6;
        Tokens tok = m2Tokens(r, tokens);
        float[] s0 = normal(r, M_STATE, 0.5);
        Tensor state = be.upload(s0, m2Shape(layout));
        Tensor[] states = new Tensor[tokens];
        for (int t = 0; t < tokens; t++) {
            states[t] = be.zeros(m2Shape(layout));
        }
        Tensor y = be.zeros(tokens, H * P);
        be.mamba2ScanStates(state, layout, tok.tensor(be, 0), tok.tensor(be, 1), be.upload(prm.dtBias(), H),
                be.upload(prm.aLog(), H), be.upload(prm.d(), H), M, states, y);
        assertArrayEquals(s0, be.download(state), "the input state is only read");
        float[] yScan = m2Scan(s0.clone(), layout, prm, tok);
        assertClose("y", yScan, be.download(y), TOL);
        for (int t = 0; t < tokens; t++) {
            assertClose("states[" + t + "]", m2After(s0, layout, prm, tok.slice(0, t + 1)),
                    be.download(states[t]), TOL);
        }
    }

    @ParameterizedTest
    @EnumSource(StateLayout.class)
    void mamba2ReplayOutputsMatchScanAndReplayMatchesEveryPrefix(StateLayout layout) {
        Random r = new Random(15);
        M2Params prm = m2Params(r);
        int tokens = 6;
        Tokens tok = m2Tokens(r, tokens);
        float[] s0 = normal(r, M_STATE, 0.5);
        Tensor state = be.upload(s0, m2Shape(layout));
        Tensor history = be.zeros(tokens + 2, M_HIST);
        float[] y = m2ReplayOutputs(state, layout, prm, tok, history);
        assertArrayEquals(s0, be.download(state), "the input state is only read");
        assertClose("y", m2Scan(s0.clone(), layout, prm, tok), y, TOL);
        for (int a = 0; a <= tokens; a++) {
            Tensor s = be.upload(s0, m2Shape(layout));
            be.mamba2Replay(s, layout, history, a, M);
            assertClose("replay of " + a, m2After(s0, layout, prm, tok.slice(0, a)), be.download(s), TOL);
        }
    }

    @ParameterizedTest
    @EnumSource(StateLayout.class)
    void mamba2ReplayOutputsMatchScalarReference(StateLayout layout) {
        Random r = new Random(16);
        M2Params prm = m2Params(r);
        Tokens tok = m2Tokens(r, 5);
        float[] s0 = normal(r, M_STATE, 0.5);
        double[] yRef = m2Reference(m2Logical(s0, layout), prm, tok);
        float[] y = m2ReplayOutputs(be.upload(s0, m2Shape(layout)), layout, prm, tok, be.zeros(5, M_HIST));
        assertClose("y", yRef, y, TOL);
    }

    @Test
    void mamba2HistoryRowsFollowTheDocumentedFormat() {
        Random r = new Random(17);
        M2Params prm = m2Params(r);
        int tokens = 4;
        Tokens tok = m2Tokens(r, tokens);
        Tensor history = be.zeros(tokens, M_HIST);
        m2ReplayOutputs(be.upload(normal(r, M_STATE, 0.5), H, P, N), StateLayout.VK, prm, tok, history);
        float[] hs = be.download(history);
        double[] c = new double[H];
        for (int t = 0; t < tokens; t++) {
            int hr = t * M_HIST;
            // x (H·P) | B (G·N) are the first columns of the xBC row
            for (int i = 0; i < H * P + GR * N; i++) {
                assertEquals(tok.parts()[0][t * M_CONV + i], hs[hr + i], "x|B " + i);
            }
            double[] dt = new double[H];
            double[] cs = new double[H];
            for (int h = 0; h < H; h++) {
                dt[h] = m2Dt(tok.parts()[1][t * H + h], prm.dtBias()[h]);
                c[h] += -Math.exp(prm.aLog()[h]) * dt[h];
                cs[h] = c[h];
            }
            int hDt = H * P + GR * N;
            assertClose("dt row " + t, dt, Arrays.copyOfRange(hs, hr + hDt, hr + hDt + H), 1e-6);
            assertClose("c row " + t, cs, Arrays.copyOfRange(hs, hr + hDt + H, hr + hDt + 2 * H), 1e-6);
        }
    }

    @ParameterizedTest
    @EnumSource(StateLayout.class)
    void mamba2ReplayChainMatchesOneLongScan(StateLayout layout) {
        Random r = new Random(18);
        M2Params prm = m2Params(r);
        float[] s0 = normal(r, M_STATE, 0.5);
        Tensor state = be.upload(s0, m2Shape(layout));
        int[][] steps = {{5, 3}, {4, 4}, {3, 0}, {2, 1}, {6, 2}}; // {tokens in the step, tokens accepted}
        Tokens accepted = m2Tokens(r, 0);
        for (int[] step : steps) {
            Tokens tok = m2Tokens(r, step[0]);
            Tensor history = be.zeros(step[0], M_HIST);
            float[] y = m2ReplayOutputs(state, layout, prm, tok, history);
            float[] yLong = m2Scan(s0.clone(), layout, prm, accepted.concat(tok));
            assertClose("y of the step", Arrays.copyOfRange(yLong, accepted.tokens() * H * P, yLong.length), y, TOL);
            be.mamba2Replay(state, layout, history, step[1], M);
            accepted = accepted.concat(tok.slice(0, step[1]));
            assertClose("state after " + accepted.tokens() + " accepted tokens",
                    m2After(s0, layout, prm, accepted), be.download(state), TOL);
        }
    }

    // ---------------------------------------------------------------- Gated DeltaNet

    record GdnParams(float[] aLog, float[] dtBias) {}

    private static GdnParams gdnParams(Random r) {
        return new GdnParams(uniform(r, HV, -1, 1), uniform(r, HV, -1, 1));
    }

    /** qkv [T, 2·Hk·Dk + Hv·Dv], a [T, Hv], b [T, Hv]. */
    private static Tokens gdnTokens(Random r, int tokens) {
        return new Tokens(tokens, new int[] {G_CONV, HV, HV},
                new float[][] {normal(r, tokens * G_CONV, 1), normal(r, tokens * HV, 1), normal(r, tokens * HV, 1.5)});
    }

    private static int[] gdnShape(StateLayout layout) {
        return layout == StateLayout.KV ? new int[] {HV, DK, DV} : new int[] {HV, DV, DK};
    }

    /** Index of element (h, i ∈ Dk, j ∈ Dv) of a GDN state: KV is [Hv, Dk, Dv], VK is [Hv, Dv, Dk]. */
    private static int gdnIndex(StateLayout layout, int h, int i, int j) {
        return layout == StateLayout.KV ? (h * DK + i) * DV + j : (h * DV + j) * DK + i;
    }

    /** A state in {@code layout} as a double array indexed (h·Dk + i)·Dv + j. */
    private static double[] gdnLogical(float[] s, StateLayout layout) {
        double[] l = new double[G_STATE];
        for (int h = 0; h < HV; h++) {
            for (int i = 0; i < DK; i++) {
                for (int j = 0; j < DV; j++) {
                    l[(h * DK + i) * DV + j] = s[gdnIndex(layout, h, i, j)];
                }
            }
        }
        return l;
    }

    private static double[] gdnPhysical(double[] l, StateLayout layout) {
        double[] s = new double[G_STATE];
        for (int h = 0; h < HV; h++) {
            for (int i = 0; i < DK; i++) {
                for (int j = 0; j < DV; j++) {
                    s[gdnIndex(layout, h, i, j)] = l[(h * DK + i) * DV + j];
                }
            }
        }
        return s;
    }

    private static double[] l2norm(float[] a, int off, int n) {
        double ss = 0;
        for (int i = 0; i < n; i++) {
            ss += (double) a[off + i] * a[off + i];
        }
        double inv = 1.0 / Math.sqrt(ss + 1e-6);
        double[] o = new double[n];
        for (int i = 0; i < n; i++) {
            o[i] = a[off + i] * inv;
        }
        return o;
    }

    private static double gdnG(float a, float aLog, float dtBias) {
        return -Math.exp(aLog) * Math.log1p(Math.exp((double) a + dtBias));
    }

    private static double sigmoid(float x) {
        return 1.0 / (1.0 + Math.exp(-x));
    }

    /**
     * Scalar gated delta rule: {@code S ← S·e^g; δ = β(v − Sᵀk); S ← S + kδᵀ; o = Sᵀq}; advances
     * {@code st} (indexed (h·Dk + i)·Dv + j) and returns o [T, Hv·Dv].
     */
    private static double[] gdnReference(double[] st, GdnParams prm, Tokens tok) {
        float[] qkv = tok.parts()[0];
        float[] as = tok.parts()[1];
        float[] bs = tok.parts()[2];
        double[] out = new double[tok.tokens() * HV * DV];
        for (int t = 0; t < tok.tokens(); t++) {
            int row = t * G_CONV;
            for (int h = 0; h < HV; h++) {
                int kh = h / (HV / HK);
                double[] q = l2norm(qkv, row + kh * DK, DK);
                double[] k = l2norm(qkv, row + HK * DK + kh * DK, DK);
                for (int i = 0; i < DK; i++) {
                    q[i] /= Math.sqrt(DK);
                }
                double beta = sigmoid(bs[t * HV + h]);
                double decay = Math.exp(gdnG(as[t * HV + h], prm.aLog()[h], prm.dtBias()[h]));
                int base = h * DK * DV;
                for (int i = 0; i < DK * DV; i++) {
                    st[base + i] *= decay;
                }
                for (int j = 0; j < DV; j++) {
                    double sk = 0;
                    for (int i = 0; i < DK; i++) {
                        sk += st[base + i * DV + j] * k[i];
                    }
                    double delta = beta * (qkv[row + 2 * HK * DK + h * DV + j] - sk);
                    double o = 0;
                    for (int i = 0; i < DK; i++) {
                        st[base + i * DV + j] += k[i] * delta;
                        o += st[base + i * DV + j] * q[i];
                    }
                    out[(t * HV + h) * DV + j] = o;
                }
            }
        }
        return out;
    }

    private Tensor[] gdnParamTensors(GdnParams prm) {
        return new Tensor[] {be.upload(prm.aLog(), HV), be.upload(prm.dtBias(), HV)};
    }

    /** gatedDeltaScan on the backend; advances {@code state} in place and returns the outputs. */
    private float[] gdnScan(float[] state, StateLayout layout, GdnParams prm, Tokens tok) {
        Tensor s = be.upload(state, gdnShape(layout));
        Tensor out = be.zeros(tok.tokens(), HV * DV);
        Tensor[] p = gdnParamTensors(prm);
        be.gatedDeltaScan(s, layout, tok.tensor(be, 0), tok.tensor(be, 1), tok.tensor(be, 2), p[0], p[1], G, out);
        System.arraycopy(be.download(s), 0, state, 0, G_STATE);
        return be.download(out);
    }

    private float[] gdnAfter(float[] s0, StateLayout layout, GdnParams prm, Tokens tok) {
        float[] s = s0.clone();
        if (tok.tokens() > 0) {
            gdnScan(s, layout, prm, tok);
        }
        return s;
    }

    private float[] gdnReplayOutputs(Tensor state, StateLayout layout, GdnParams prm, Tokens tok, Tensor history) {
        Tensor out = be.zeros(tok.tokens(), HV * DV);
        Tensor[] p = gdnParamTensors(prm);
        be.gatedDeltaReplayOutputs(state, layout, tok.tensor(be, 0), tok.tensor(be, 1), tok.tensor(be, 2), p[0], p[1],
                G, history, out);
        return be.download(out);
    }

    @ParameterizedTest
    @EnumSource(StateLayout.class)
    void gatedDeltaScanMatchesScalarReference(StateLayout layout) {
        Random r = new Random(21);
        GdnParams prm = gdnParams(r);
        Tokens tok = gdnTokens(r, 6);
        float[] s0 = normal(r, G_STATE, 0.5);
        double[] ref = gdnLogical(s0, layout);
        double[] oRef = gdnReference(ref, prm, tok);
        float[] s = s0.clone();
        float[] o = gdnScan(s, layout, prm, tok);
        assertClose("out", oRef, o, TOL);
        assertClose("final state", gdnPhysical(ref, layout), s, TOL);
    }

    @ParameterizedTest
    @EnumSource(StateLayout.class)
    void gatedDeltaScanLayoutsAgree(StateLayout layout) {
        Random r = new Random(22);
        GdnParams prm = gdnParams(r);
        Tokens tok = gdnTokens(r, 6);
        float[] s = normal(r, G_STATE, 0.5);
        int rows = layout == StateLayout.KV ? DK : DV;
        int cols = layout == StateLayout.KV ? DV : DK;
        float[] other = transposeHeads(s, HV, rows, cols);
        float[] o = gdnScan(s, layout, prm, tok);
        float[] oOther = gdnScan(other, layout.other(), prm, tok);
        assertClose("out", o, oOther, TOL);
        assertClose("final state", s, transposeHeads(other, HV, cols, rows), TOL);
    }

    @ParameterizedTest
    @EnumSource(StateLayout.class)
    void gatedDeltaScanStatesMatchPrefixScans(StateLayout layout) {
        Random r = new Random(23);
        GdnParams prm = gdnParams(r);
        int tokens = 6;
        Tokens tok = gdnTokens(r, tokens);
        float[] s0 = normal(r, G_STATE, 0.5);
        Tensor state = be.upload(s0, gdnShape(layout));
        Tensor[] states = new Tensor[tokens];
        for (int t = 0; t < tokens; t++) {
            states[t] = be.zeros(gdnShape(layout));
        }
        Tensor out = be.zeros(tokens, HV * DV);
        Tensor[] p = gdnParamTensors(prm);
        be.gatedDeltaScanStates(state, layout, tok.tensor(be, 0), tok.tensor(be, 1), tok.tensor(be, 2), p[0], p[1], G,
                states, out);
        assertArrayEquals(s0, be.download(state), "the input state is only read");
        assertClose("out", gdnScan(s0.clone(), layout, prm, tok), be.download(out), TOL);
        for (int t = 0; t < tokens; t++) {
            assertClose("states[" + t + "]", gdnAfter(s0, layout, prm, tok.slice(0, t + 1)),
                    be.download(states[t]), TOL);
        }
    }

    @ParameterizedTest
    @EnumSource(StateLayout.class)
    void gatedDeltaReplayOutputsMatchScanAndReplayMatchesEveryPrefix(StateLayout layout) {
        Random r = new Random(24);
        GdnParams prm = gdnParams(r);
        int tokens = 6;
        Tokens tok = gdnTokens(r, tokens);
        float[] s0 = normal(r, G_STATE, 0.5);
        Tensor state = be.upload(s0, gdnShape(layout));
        Tensor history = be.zeros(tokens + 1, G_HIST);
        float[] o = gdnReplayOutputs(state, layout, prm, tok, history);
        assertArrayEquals(s0, be.download(state), "the input state is only read");
        assertClose("out", gdnScan(s0.clone(), layout, prm, tok), o, TOL);
        assertClose("out vs reference", gdnReference(gdnLogical(s0, layout), prm, tok), o, TOL);
        for (int a = 0; a <= tokens; a++) {
            Tensor s = be.upload(s0, gdnShape(layout));
            be.gatedDeltaReplay(s, layout, history, a, G);
            assertClose("replay of " + a, gdnAfter(s0, layout, prm, tok.slice(0, a)), be.download(s), TOL);
        }
    }

    @Test
    void gatedDeltaHistoryRowsFollowTheDocumentedFormat() {
        Random r = new Random(25);
        GdnParams prm = gdnParams(r);
        int tokens = 3;
        Tokens tok = gdnTokens(r, tokens);
        Tensor history = be.zeros(tokens, G_HIST);
        gdnReplayOutputs(be.upload(normal(r, G_STATE, 0.5), gdnShape(StateLayout.KV)), StateLayout.KV, prm, tok,
                history);
        float[] hs = be.download(history);
        float[] qkv = tok.parts()[0];
        for (int t = 0; t < tokens; t++) {
            double[] expected = new double[G_HIST];
            for (int kh = 0; kh < HK; kh++) {
                System.arraycopy(l2norm(qkv, t * G_CONV + HK * DK + kh * DK, DK), 0, expected, kh * DK, DK);
            }
            for (int i = 0; i < HV * DV; i++) {
                expected[HK * DK + i] = qkv[t * G_CONV + 2 * HK * DK + i];
            }
            for (int h = 0; h < HV; h++) {
                expected[HK * DK + HV * DV + h] = gdnG(tok.parts()[1][t * HV + h], prm.aLog()[h], prm.dtBias()[h]);
                expected[HK * DK + HV * DV + HV + h] = sigmoid(tok.parts()[2][t * HV + h]);
            }
            assertClose("history row " + t, expected, Arrays.copyOfRange(hs, t * G_HIST, (t + 1) * G_HIST), 1e-6);
        }
    }

    @ParameterizedTest
    @EnumSource(StateLayout.class)
    void gatedDeltaReplayChainMatchesOneLongScan(StateLayout layout) {
        Random r = new Random(26);
        GdnParams prm = gdnParams(r);
        float[] s0 = normal(r, G_STATE, 0.5);
        Tensor state = be.upload(s0, gdnShape(layout));
        int[][] steps = {{5, 3}, {4, 4}, {3, 0}, {2, 1}, {6, 2}}; // {tokens in the step, tokens accepted}
        Tokens accepted = gdnTokens(r, 0);
        for (int[] step : steps) {
            Tokens tok = gdnTokens(r, step[0]);
            Tensor history = be.zeros(step[0], G_HIST);
            float[] o = gdnReplayOutputs(state, layout, prm, tok, history);
            float[] oLong = gdnScan(s0.clone(), layout, prm, accepted.concat(tok));
            assertClose("out of the step", Arrays.copyOfRange(oLong, accepted.tokens() * HV * DV, oLong.length), o,
                    TOL);
            be.gatedDeltaReplay(state, layout, history, step[1], G);
            accepted = accepted.concat(tok.slice(0, step[1]));
            assertClose("state after " + accepted.tokens() + " accepted tokens",
                    gdnAfter(s0, layout, prm, accepted), be.download(state), TOL);
        }
    }

    // ---------------------------------------------------------------- helpers

    /** Per head {@code [rows, cols] → [cols, rows]}, written out as a plain loop. */
    static float[] transposeHeads(float[] s, int heads, int rows, int cols) {
        float[] o = new float[s.length];
        for (int h = 0; h < heads; h++) {
            for (int i = 0; i < rows; i++) {
                for (int j = 0; j < cols; j++) {
                    o[h * rows * cols + j * rows + i] = s[h * rows * cols + i * cols + j];
                }
            }
        }
        return o;
    }
}
