package dev.hyspec.tokenizer;

import java.beans.FeatureDescriptor;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.Collection;
import java.util.Iterator;
import java.util.List;
import java.util.Locale;
import java.util.regex.Pattern;
import jinjava.javax.el.ELContext;
import jinjava.javax.el.ELException;
import jinjava.javax.el.ELResolver;

/**
 * Gives template strings the Python {@code str} methods that Hugging Face chat templates call and
 * that Java's {@code String} lacks or spells differently: {@code strip}, {@code lstrip},
 * {@code rstrip} (each with optional characters), {@code startswith}, {@code endswith} (a prefix or
 * a list of them), {@code split} (optional separator and maxsplit), {@code upper}, {@code lower},
 * {@code title}, {@code capitalize}, {@code replace} (optional count) and {@code join}, all with
 * Python's semantics. Indexing a string by an integer, negative counting from the end, gives
 * that character (none when out of range, which a template prints as nothing). Other method calls
 * and properties fall through to Jinjava's own resolvers.
 */
final class PythonStringMethods extends ELResolver {
    private static final Pattern INDEX = Pattern.compile("-?[0-9]+");

    @Override
    public Object invoke(ELContext context, Object base, Object method, Class<?>[] paramTypes, Object[] params) {
        if (!(base instanceof String) || method == null) {
            return null;
        }
        String s = (String) base;
        Object[] args = params == null ? new Object[0] : params;
        String name = method.toString();
        Object result;
        switch (name) {
            case "strip" -> result = strip(s, chars(name, args), true, true);
            case "lstrip" -> result = strip(s, chars(name, args), true, false);
            case "rstrip" -> result = strip(s, chars(name, args), false, true);
            case "startswith" -> result = affixes(name, args).stream().anyMatch(s::startsWith);
            case "endswith" -> result = affixes(name, args).stream().anyMatch(s::endsWith);
            case "split" -> result = split(s, args);
            case "upper" -> result = noArgs(name, args, s.toUpperCase(Locale.ROOT));
            case "lower" -> result = noArgs(name, args, s.toLowerCase(Locale.ROOT));
            case "title" -> result = noArgs(name, args, title(s));
            case "capitalize" -> result = noArgs(name, args, capitalize(s));
            case "replace" -> result = replace(s, args);
            case "join" -> result = join(s, args);
            default -> {
                return null;
            }
        }
        context.setPropertyResolved(true);
        return result;
    }

    private static String noArgs(String name, Object[] args, String result) {
        if (args.length != 0) {
            throw new ELException("str." + name + "() takes no arguments");
        }
        return result;
    }

    private static String chars(String name, Object[] args) {
        if (args.length > 1) {
            throw new ELException("str." + name + "() takes at most 1 argument");
        }
        if (args.length == 0 || args[0] == null) {
            return null;
        }
        return string(name, args[0]);
    }

    private static List<String> affixes(String name, Object[] args) {
        if (args.length != 1) {
            throw new ELException("str." + name + "() takes exactly 1 argument here");
        }
        List<String> result = new ArrayList<>();
        if (args[0] instanceof Collection<?> options) {
            for (Object option : options) {
                result.add(string(name, option));
            }
        } else {
            result.add(string(name, args[0]));
        }
        return result;
    }

    private static String string(String name, Object value) {
        if (value instanceof String text) {
            return text;
        }
        throw new ELException("str." + name + "() expects a string, got "
                + (value == null ? "none" : value.getClass().getSimpleName()));
    }

    private static int integer(String name, Object value) {
        if (value instanceof Number number && !(value instanceof Double) && !(value instanceof Float)) {
            return Math.toIntExact(number.longValue());
        }
        throw new ELException("str." + name + "() expects an integer, got "
                + (value == null ? "none" : value.getClass().getSimpleName()));
    }

    /** Python's {@code str.isspace} for one code point. */
    private static boolean isSpace(int codePoint) {
        return Character.isWhitespace(codePoint) || Character.isSpaceChar(codePoint) || codePoint == 0x85;
    }

    private static String strip(String s, String chars, boolean left, boolean right) {
        int start = 0;
        int end = s.length();
        while (left && start < end && stripped(s.codePointAt(start), chars)) {
            start += Character.charCount(s.codePointAt(start));
        }
        while (right && end > start && stripped(s.codePointBefore(end), chars)) {
            end -= Character.charCount(s.codePointBefore(end));
        }
        return s.substring(start, end);
    }

    private static boolean stripped(int codePoint, String chars) {
        return chars == null ? isSpace(codePoint) : chars.codePoints().anyMatch(c -> c == codePoint);
    }

    private static List<String> split(String s, Object[] args) {
        if (args.length > 2) {
            throw new ELException("str.split() takes at most 2 arguments");
        }
        String sep = args.length > 0 && args[0] != null ? string("split", args[0]) : null;
        int maxSplit = args.length > 1 ? integer("split", args[1]) : -1;
        List<String> parts = new ArrayList<>();
        if (sep == null) {
            // Runs of whitespace separate; leading and trailing whitespace yields no empty parts.
            int i = 0;
            int n = s.length();
            while (true) {
                while (i < n && isSpace(s.codePointAt(i))) {
                    i += Character.charCount(s.codePointAt(i));
                }
                if (i >= n) {
                    break;
                }
                if (maxSplit >= 0 && parts.size() == maxSplit) {
                    parts.add(strip(s.substring(i), null, false, true));
                    break;
                }
                int start = i;
                while (i < n && !isSpace(s.codePointAt(i))) {
                    i += Character.charCount(s.codePointAt(i));
                }
                parts.add(s.substring(start, i));
            }
            return parts;
        }
        if (sep.isEmpty()) {
            throw new ELException("str.split(): empty separator");
        }
        int start = 0;
        int found;
        while ((maxSplit < 0 || parts.size() < maxSplit) && (found = s.indexOf(sep, start)) >= 0) {
            parts.add(s.substring(start, found));
            start = found + sep.length();
        }
        parts.add(s.substring(start));
        return parts;
    }

    private static boolean isCased(int codePoint) {
        return Character.isUpperCase(codePoint) || Character.isLowerCase(codePoint) || Character.isTitleCase(codePoint);
    }

    private static String title(String s) {
        StringBuilder out = new StringBuilder(s.length());
        boolean previousCased = false;
        for (int i = 0; i < s.length(); ) {
            int c = s.codePointAt(i);
            out.append(previousCased ? lower(c) : titleCase(c));
            previousCased = isCased(c);
            i += Character.charCount(c);
        }
        return out.toString();
    }

    private static String capitalize(String s) {
        if (s.isEmpty()) {
            return s;
        }
        int first = s.codePointAt(0);
        return titleCase(first) + s.substring(Character.charCount(first)).toLowerCase(Locale.ROOT);
    }

    private static String titleCase(int codePoint) {
        return new String(Character.toChars(Character.toTitleCase(codePoint)));
    }

    private static String lower(int codePoint) {
        return new String(Character.toChars(codePoint)).toLowerCase(Locale.ROOT);
    }

    private static String replace(String s, Object[] args) {
        if (args.length < 2 || args.length > 3) {
            throw new ELException("str.replace() takes 2 or 3 arguments");
        }
        String old = string("replace", args[0]);
        String replacement = string("replace", args[1]);
        int count = args.length == 3 ? integer("replace", args[2]) : -1;
        if (count < 0) {
            return s.replace(old, replacement);
        }
        StringBuilder out = new StringBuilder();
        int start = 0;
        int done = 0;
        if (old.isEmpty()) {
            // Python inserts the replacement before every character (and at the end), up to count times.
            int i = 0;
            while (done < count && i <= s.length()) {
                out.append(replacement);
                done++;
                if (i < s.length()) {
                    int c = s.codePointAt(i);
                    out.appendCodePoint(c);
                    i += Character.charCount(c);
                } else {
                    i++;
                }
            }
            return i <= s.length() ? out.append(s, i, s.length()).toString() : out.toString();
        }
        int found;
        while (done < count && (found = s.indexOf(old, start)) >= 0) {
            out.append(s, start, found).append(replacement);
            start = found + old.length();
            done++;
        }
        return out.append(s.substring(start)).toString();
    }

    private static String join(String separator, Object[] args) {
        if (args.length != 1 || args[0] == null) {
            throw new ELException("str.join() takes exactly 1 argument");
        }
        Iterator<?> items;
        if (args[0] instanceof Iterable<?> iterable) {
            items = iterable.iterator();
        } else if (args[0] instanceof Object[] array) {
            items = Arrays.asList(array).iterator();
        } else {
            throw new ELException("str.join() expects a list of strings");
        }
        StringBuilder out = new StringBuilder();
        boolean first = true;
        while (items.hasNext()) {
            if (!first) {
                out.append(separator);
            }
            out.append(string("join", items.next()));
            first = false;
        }
        return out.toString();
    }

    @Override
    public Object getValue(ELContext context, Object base, Object property) {
        // Jinjava hands bracket indexes over as strings ("-1"), so digits are read back as an index.
        if (!(base instanceof String s) || property == null || !INDEX.matcher(property.toString()).matches()) {
            return null;
        }
        context.setPropertyResolved(true);
        int[] codePoints = s.codePoints().toArray();
        long index;
        try {
            index = Long.parseLong(property.toString());
        } catch (NumberFormatException e) {
            return null;
        }
        long i = index < 0 ? index + codePoints.length : index;
        return i < 0 || i >= codePoints.length ? null : new String(codePoints, (int) i, 1);
    }

    @Override
    public Class<?> getType(ELContext context, Object base, Object property) {
        return null;
    }

    @Override
    public void setValue(ELContext context, Object base, Object property, Object value) {}

    @Override
    public boolean isReadOnly(ELContext context, Object base, Object property) {
        return false;
    }

    @Override
    public Iterator<FeatureDescriptor> getFeatureDescriptors(ELContext context, Object base) {
        return null;
    }

    @Override
    public Class<?> getCommonPropertyType(ELContext context, Object base) {
        return null;
    }
}
