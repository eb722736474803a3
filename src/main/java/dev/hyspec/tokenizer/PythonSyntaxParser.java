package dev.hyspec.tokenizer;

import static jinjava.de.odysseus.el.tree.impl.Builder.Feature.METHOD_INVOCATIONS;
import static jinjava.de.odysseus.el.tree.impl.Builder.Feature.NULL_PROPERTIES;

import com.hubspot.jinjava.el.ExtendedSyntaxBuilder;
import com.hubspot.jinjava.el.ext.AstNamedParameter;
import com.hubspot.jinjava.el.ext.ExtendedParser;
import com.hubspot.jinjava.el.ext.NamedParameterOperator;
import jinjava.de.odysseus.el.tree.impl.Builder;
import jinjava.de.odysseus.el.tree.impl.Scanner.ScanException;
import jinjava.de.odysseus.el.tree.impl.Scanner.Symbol;
import jinjava.de.odysseus.el.tree.impl.Scanner.Token;
import jinjava.de.odysseus.el.tree.impl.ast.AstBracket;
import jinjava.de.odysseus.el.tree.impl.ast.AstDot;
import jinjava.de.odysseus.el.tree.impl.ast.AstIdentifier;
import jinjava.de.odysseus.el.tree.impl.ast.AstNode;

/**
 * Jinjava's expression parser with two Jinja2 forms it lacks, both used by Qwen3's chat template:
 * slices with a step ({@code messages[::-1]}), and keyword arguments whose value is a whole
 * expression ({@code namespace(last=messages|length - 1)}, which Jinjava parses as
 * {@code (last=messages|length) - 1}).
 *
 * <p>It assumes Jinjava's natural operator precedence is on, as {@link ChatTemplate} sets it.
 */
final class PythonSyntaxParser extends ExtendedParser {

    /** Builds expression trees with {@link PythonSyntaxParser}. */
    static final class SyntaxBuilder extends ExtendedSyntaxBuilder {
        private static final long serialVersionUID = 1L;

        SyntaxBuilder() {
            // The features Jinjava's default expression factory (JUEL's JEE6 profile) enables.
            super(Builder.Feature.METHOD_INVOCATIONS, Builder.Feature.VARARGS);
        }

        @Override
        protected PythonSyntaxParser createParser(String expression) {
            return new PythonSyntaxParser(this, expression);
        }
    }

    PythonSyntaxParser(Builder context, String input) {
        super(context, input);
        // No operator level takes "=" any more; expr() below reads "name=" before a whole expression.
        putExtensionHandler(NamedParameterOperator.TOKEN, new ExtensionHandler(null) {
            @Override
            public AstNode createAstNode(AstNode... children) {
                throw new IllegalStateException("'=' is parsed in expr()");
            }
        });
    }

    @Override
    protected AstNode expr(boolean required) throws ScanException, ParseException {
        AstNode v = super.expr(required);
        if (v instanceof AstIdentifier name && isNamedParameterOperator(getToken())) {
            consumeToken();
            return new AstNamedParameter(name, super.expr(true));
        }
        return v;
    }

    private static boolean isNamedParameterOperator(Token token) {
        return token.getSymbol() == Symbol.EXTENSION && NamedParameterOperator.TOKEN.getImage().equals(token.getImage());
    }

    /** Jinjava's {@code value()}, with a third, step, part allowed in slices. */
    @Override
    protected AstNode value() throws ScanException, ParseException {
        boolean lvalue = true;
        AstNode v = nonliteral();
        if (v == null) {
            v = literal();
            if (v == null) {
                return null;
            }
            lvalue = false;
        }
        while (true) {
            switch (getToken().getSymbol()) {
                case DOT -> {
                    consumeToken();
                    String name = consumeToken(Symbol.IDENTIFIER).getImage();
                    AstDot dot = createAstDot(v, name, lvalue);
                    v = getToken().getSymbol() == Symbol.LPAREN && context.isEnabled(METHOD_INVOCATIONS)
                            ? createAstMethod(dot, params())
                            : dot;
                }
                case LBRACK -> {
                    consumeToken();
                    AstNode start = expr(false);
                    boolean strict = !context.isEnabled(NULL_PROPERTIES);
                    Token next = consumeToken();
                    if (next.getSymbol() == Symbol.COLON) {
                        AstNode stop = expr(false);
                        AstNode step = null;
                        boolean stepped = getToken().getSymbol() == Symbol.COLON;
                        if (stepped) {
                            consumeToken();
                            step = expr(false);
                        }
                        consumeToken(Symbol.RBRACK);
                        v = stepped
                                ? new AstPythonSlice(v, start, stop, step, lvalue, strict)
                                : createAstRangeBracket(v, start, stop, lvalue, strict);
                    } else if (next.getSymbol() == Symbol.RBRACK) {
                        AstBracket bracket = createAstBracket(v, start, lvalue, strict);
                        v = getToken().getSymbol() == Symbol.LPAREN && context.isEnabled(METHOD_INVOCATIONS)
                                ? createAstMethod(bracket, params())
                                : bracket;
                    } else {
                        fail(Symbol.RBRACK);
                    }
                }
                default -> {
                    return v;
                }
            }
        }
    }
}
