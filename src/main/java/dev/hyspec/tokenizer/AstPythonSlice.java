package dev.hyspec.tokenizer;

import com.hubspot.jinjava.el.ext.AstRangeBracket;
import com.hubspot.jinjava.objects.collections.PyList;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;
import jinjava.de.odysseus.el.tree.Bindings;
import jinjava.de.odysseus.el.tree.impl.ast.AstNode;
import jinjava.javax.el.ELContext;
import jinjava.javax.el.ELException;

/**
 * A Python slice with a step, {@code seq[start:stop:step]}, over a list or a string (indexed by
 * code point, as Python does), with Python's rules for omitted, negative and out-of-range bounds.
 */
final class AstPythonSlice extends AstRangeBracket {
    private final AstNode step;

    AstPythonSlice(AstNode base, AstNode start, AstNode stop, AstNode step, boolean lvalue, boolean strict) {
        super(base, start, stop, lvalue, strict, false);
        this.step = step;
    }

    @Override
    public Object eval(Bindings bindings, ELContext context) {
        Object base = prefix.eval(bindings, context);
        List<Object> items;
        if (base instanceof String text) {
            items = new ArrayList<>();
            text.codePoints().forEach(c -> items.add(new String(Character.toChars(c))));
        } else if (base instanceof Iterable<?> iterable) {
            items = new ArrayList<>();
            iterable.forEach(items::add);
        } else if (base instanceof Object[] array) {
            items = Arrays.asList(array);
        } else {
            throw new ELException("cannot slice " + (base == null ? "none" : base.getClass().getSimpleName()));
        }
        int n = items.size();
        Long stepValue = bound(step, bindings, context);
        long by = stepValue == null ? 1 : stepValue;
        if (by == 0) {
            throw new ELException("slice step cannot be zero");
        }
        long from = adjust(bound(property, bindings, context), n, by, by > 0 ? 0 : n - 1);
        long to = adjust(bound(rangeMax, bindings, context), n, by, by > 0 ? n : -1);

        List<Object> result = new ArrayList<>();
        for (long i = from; by > 0 ? i < to : i > to; i += by) {
            result.add(items.get((int) i));
        }
        if (base instanceof String) {
            return String.join("", result.stream().map(String.class::cast).toList());
        }
        return new PyList(result);
    }

    private static Long bound(AstNode node, Bindings bindings, ELContext context) {
        if (node == null) {
            return null;
        }
        Object value = node.eval(bindings, context);
        if (value == null) {
            return null;
        }
        if (value instanceof Number number && !(value instanceof Double) && !(value instanceof Float)) {
            return number.longValue();
        }
        throw new ELException("slice indices must be integers or none, got " + value.getClass().getSimpleName());
    }

    // CPython's PySlice_AdjustIndices for one bound.
    private static long adjust(Long bound, int n, long step, long omitted) {
        if (bound == null) {
            return omitted;
        }
        long i = bound;
        if (i < 0) {
            i += n;
            if (i < 0) {
                i = step < 0 ? -1 : 0;
            }
        } else if (i >= n) {
            i = step < 0 ? n - 1 : n;
        }
        return i;
    }

    @Override
    public String toString() {
        return "[::]";
    }
}
